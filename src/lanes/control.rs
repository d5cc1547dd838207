//! What a lane worker does with events that are not model turns: skipped events, events it
//! gives up on, chat commands, and internal control events (session rotation, delivery
//! mirrors, notices). All of it runs under the lane's lease, like a turn.

use super::commands::{Command, HELP_TEXT, NEW_REFUSED, STOP_REFUSED};
use super::worker::{Failure, Worker};
use crate::domain::{Control, MessageEvent, Role, SessionId};
use crate::hooks::Authorizer;
use crate::store::{
    InboxAttempt, InboxRow, InboxStatus, Lease, NewMessage, NewOutbox, OutboxKey, StoreError,
    TurnCommit,
};

/// Inbox rows of a session read to tell whose it is (a group's `/new`); beyond them it counts
/// as what they show.
const SPEAKERS_READ: i64 = 2000;

impl Worker {
    /// Closes an event without a turn, queueing `reply` to the chat when given.
    pub(super) async fn skip(
        &self,
        row: &InboxRow,
        note: &str,
        reply: Option<String>,
    ) -> Result<(), Failure> {
        let deps = &self.router.deps;
        let outbox = reply
            .map(|text| self.outbox_rows(row, &text, "skip"))
            .unwrap_or_default();
        deps.store.inbox_skip(row.id, note, &outbox).await?;
        if !outbox.is_empty() {
            deps.outbox_wake.notify_one();
        }
        Ok(())
    }

    /// Dead-letters an event whose `tries` starts all failed (crashed, or refused by the
    /// store): the person hears once that it could not be processed (an outbox row keyed by
    /// the event, so a retried give-up sends nothing more), the row is marked `dead` with the
    /// reason, and the lane's next messages go on. `herald inbox dead` lists it.
    pub(super) async fn give_up(
        &self,
        row: &InboxRow,
        tries: i64,
        refused: Option<&StoreError>,
    ) -> Result<(), Failure> {
        let (reply, note) = match refused {
            Some(e) => {
                tracing::error!(inbox_id = row.id, lane = %row.lane, attempts = tries, error = %e,
                    "inbound message dead-lettered: the store refused to save its turn");
                (
                    format!(
                        "Sorry, your message could not be processed: I could not save this \
                         conversation (tried {tries} times). It has been set aside; please try again."
                    ),
                    format!("the store refused the turn {tries} times ({e})"),
                )
            }
            None => {
                tracing::error!(
                    inbox_id = row.id,
                    lane = %row.lane,
                    attempts = tries,
                    "inbound message dead-lettered: every start of its processing ended without a result (a crash, a kill or a panic)"
                );
                (
                    format!(
                        "Sorry, your message could not be processed (tried {tries} times). It has \
                         been set aside; you can send something else."
                    ),
                    format!("{tries} starts ended without a result (a crash, a kill or a panic)"),
                )
            }
        };
        self.forget();
        let deps = &self.router.deps;
        let outbox = if row.event.is_internal() {
            Vec::new()
        } else {
            self.outbox_rows(row, &reply, "dead")
        };
        deps.store.inbox_give_up(row.id, &note, &outbox).await?;
        metrics::counter!("herald_inbox_dead_total").increment(1);
        if !outbox.is_empty() {
            deps.outbox_wake.notify_one();
        }
        Ok(())
    }

    pub(super) async fn command(
        &self,
        lease: &Lease,
        row: &InboxRow,
        cmd: Command,
    ) -> Result<(), Failure> {
        let store = &self.router.deps.store;
        let ev = &row.event;
        let reply = match cmd {
            Command::Start | Command::Help => HELP_TEXT.to_string(),
            Command::New => match store.session_current(&self.lane).await? {
                Some(s) => {
                    if self.may_reset(ev, &s.id).await? {
                        store.session_close(lease, &s.id, "new").await?;
                        "Started a new session. Earlier messages stay searchable.".to_string()
                    } else {
                        NEW_REFUSED.to_string()
                    }
                }
                None => "This is already a fresh session.".to_string(),
            },
            // A running turn was cancelled when the command arrived (see the router) and
            // ended without a reply of its own: this is the one answer to `/stop`. A group
            // member's `/stop` that found another member's turn left it running.
            Command::Stop => {
                let stopped = self
                    .router
                    .stopped
                    .lock()
                    .expect("stopped lock")
                    .remove(&self.lane);
                let refused = self
                    .router
                    .refused_stops
                    .lock()
                    .expect("refused lock")
                    .remove(&(self.lane.clone(), ev.sender_id.clone()));
                if stopped {
                    "Stopped.".to_string()
                } else if refused {
                    STOP_REFUSED.to_string()
                } else {
                    "Nothing is running in this conversation now.".to_string()
                }
            }
            Command::Status => self.router.status_text(&self.lane).await?,
            Command::Usage => super::usage::usage_text(&self.router.deps, &row.event).await?,
            Command::Voice(on) => super::voice::command(&self.router.deps, &self.lane, on).await?,
            Command::Agent => {
                super::agent_cmd::command(&self.router.deps, lease, &self.lane, ev).await?
            }
        };
        self.skip(row, "command", Some(reply)).await
    }

    /// Whether the sender of `ev` may close `session` with `/new`: anyone in a private chat;
    /// in a group an admin (`approvals.admins`), or a member every message of the session
    /// came from.
    async fn may_reset(&self, ev: &MessageEvent, session: &SessionId) -> Result<bool, Failure> {
        let auth = &self.router.deps.auth;
        if !Authorizer::in_group(ev) || auth.is_admin(ev) {
            return Ok(true);
        }
        let speakers = self
            .router
            .deps
            .store
            .session_speakers(&self.lane, session, SPEAKERS_READ)
            .await?;
        Ok(speakers.iter().all(|s| *s == ev.sender_id))
    }

    pub(super) async fn control(
        &self,
        lease: &Lease,
        row: &InboxRow,
        ev: &MessageEvent,
        control: &Control,
    ) -> Result<(), Failure> {
        let store = &self.router.deps.store;
        match control {
            Control::RotateSession { session_id, reason } => {
                if let Some(s) = store.session_current(&self.lane).await? {
                    if &s.id == session_id {
                        store.session_close(lease, &s.id, reason).await?;
                        tracing::info!(session = %s.id, reason, "session rotated");
                    }
                }
                self.skip(row, "control: rotate session", None).await
            }
            Control::Notice { key, text } => {
                let notice = NewOutbox {
                    key: OutboxKey::Single(key.clone()),
                    lane: self.lane.clone(),
                    platform: ev.platform,
                    chat_id: ev.chat_id.clone(),
                    thread_id: ev.thread_id.clone(),
                    // Not a reply: the control event's id is no platform message.
                    reply_to: None,
                    inbox_id: None,
                    chunk_index: 0,
                    text: text.clone(),
                    media: None,
                };
                store
                    .inbox_skip_leased(lease, row.id, "control: notice", &[notice])
                    .await?;
                self.router.deps.outbox_wake.notify_one();
                Ok(())
            }
            Control::Mirror { label, text } => {
                let asked = format!("[scheduled delivery: {label}]");
                let said = format!("[Delivered scheduled brief \"{label}\"]\n{text}");
                self.mirror(lease, row, ev, asked, said).await
            }
            Control::Relayed { from, text } => {
                let asked = format!("[message sent here from the conversation {from}]");
                let said = format!("[Sent here at the request of {from}]\n{text}");
                self.mirror(lease, row, ev, asked, said).await
            }
        }
    }

    /// Appends what was delivered to this chat from outside its own turns (`said`, preceded by
    /// `asked` when needed to keep user/assistant alternation), as a turn of the lane.
    async fn mirror(
        &self,
        lease: &Lease,
        row: &InboxRow,
        ev: &MessageEvent,
        asked: String,
        said: String,
    ) -> Result<(), Failure> {
        let deps = &self.router.deps;
        let store = &deps.store;
        let agent = deps.agents.for_turn(store.as_ref(), &self.lane, ev).await;
        let session = self.session(lease, ev, &agent).await?;
        let history = store.messages(&session.id, true).await?;
        let mut messages = Vec::new();
        // Keep user/assistant alternation valid for strict chat templates.
        if history.last().is_none_or(|m| m.role != Role::User) {
            messages.push(NewMessage::new(Role::User, asked));
        }
        messages.push(NewMessage::new(Role::Assistant, said));
        let attempt = InboxAttempt {
            id: row.id,
            attempt: row.attempts + 1,
        };
        let turn_id = store.turn_begin(lease, &session.id, Some(attempt)).await?;
        let mut commit = TurnCommit::new(turn_id, &session.id, Some(row.id), InboxStatus::Done);
        commit.messages = messages;
        commit.note = Some("delivery mirror".into());
        store.turn_commit(lease, &commit).await?;
        Ok(())
    }
}
