//! Approvals in the chat: a tool call that needs a person's word pauses its turn, asks in the
//! person's own chat (buttons), and waits — durably — for a press from someone allowed to
//! answer in that chat, or for the deadline, which is a denial.
//!
//! The store row is the wait ([`crate::store::ApprovalStore`]): a retried turn (after a crash
//! or a lost lease) finds the request its earlier attempt opened, does not ask twice, resumes
//! the wait or, past the deadline, denies; an approved call runs at most once and a retry reads
//! its recorded result back. A press on any replica answers; waiters here are woken at once,
//! waiters on other replicas see it on their next poll of the row.
//!
//! This file is the desk (presses, wake-ups, closing what a stopped turn left open);
//! `gate.rs` is one turn's side of it; `kept.rs` keeps the results of calls that needed no
//! approval, so a retried turn does not run them again either.
//!
//! Must not: let anyone but an allowed sender of the approval's own chat answer it, or treat
//! a missing or unreadable row as consent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::task::TaskTracker;

use crate::config::{spec, Admit};
use crate::delivery::Outbounds;
use crate::domain::{ChatType, MessageEvent, MessageKind, Origin, Person, Platform};
use crate::hooks::Authorizer;
use crate::store::{now_ms, ApprovalRow, Store};

use super::clock::TurnClock;

mod budget;
mod gate;
mod kept;
mod linked;
mod words;

pub use gate::TurnGate;
pub use words::{answer_in_words, question_in_words, WordReply, ASK_IN_WORDS};

/// One press of an approval button, translated at the platform edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Press {
    pub approval_id: String,
    pub approve: bool,
    pub platform: Platform,
    /// The chat the button was pressed in.
    pub chat_id: String,
    pub sender_id: String,
    /// Discord member roles of the presser (role allowlists).
    pub sender_roles: Vec<String>,
}

/// What a press achieved; [`PressOutcome::text`] is the short answer the presser sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PressOutcome {
    Approved,
    Denied,
    /// The presser may not answer this request (another chat, or not an allowed sender).
    NotYours,
    /// An allowed member of the chat, but only the requester (named) may answer
    /// (`approvals.only_requester`).
    OnlyRequester(String),
    /// Answered or expired already, or no such request.
    NotOpen,
}

impl PressOutcome {
    pub fn text(&self) -> String {
        match self {
            PressOutcome::Approved => "Approved.".into(),
            PressOutcome::Denied => "Denied.".into(),
            PressOutcome::NotYours => "You cannot answer this request.".into(),
            PressOutcome::OnlyRequester(name) => format!("Only {name} can answer this request."),
            PressOutcome::NotOpen => "This request is no longer open.".into(),
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            PressOutcome::Approved => "approved",
            PressOutcome::Denied => "denied",
            PressOutcome::NotYours | PressOutcome::OnlyRequester(_) => "refused",
            PressOutcome::NotOpen => "not_open",
        }
    }
}

/// The settings of the desk a reload replaces.
#[derive(Clone, Default)]
struct Live {
    only_requester: bool,
    /// `budget.approvers` as identities: who may answer a budget extension question.
    budget_approvers: Vec<String>,
    /// `[[people]]`: an API conversation's questions go to its person's linked chat.
    people: Vec<crate::config::Person>,
}

/// The process's approval desk: answers presses and wakes the turns waiting on them.
#[derive(Clone)]
pub struct Approvals {
    store: Arc<dyn Store>,
    outbounds: Outbounds,
    auth: Authorizer,
    timeout: Duration,
    /// What a reload replaces ([`Approvals::replace`]), shared by every clone.
    live: Arc<std::sync::RwLock<Arc<Live>>>,
    waiting: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
    /// Where a question's send runs (`gate.rs`): the app's, so shutdown waits for it.
    tracker: TaskTracker,
}

impl Approvals {
    pub fn new(
        store: Arc<dyn Store>,
        outbounds: Outbounds,
        auth: Authorizer,
        timeout: Duration,
    ) -> Approvals {
        Approvals {
            store,
            outbounds,
            auth,
            timeout,
            live: Arc::new(std::sync::RwLock::new(Arc::new(Live {
                only_requester: true,
                ..Live::default()
            }))),
            waiting: Arc::default(),
            tracker: TaskTracker::new(),
        }
    }

    /// The app's task tracker, for the sends of questions that outlive their turn.
    pub fn tracker(mut self, tracker: TaskTracker) -> Approvals {
        self.tracker = tracker;
        self
    }

    /// `approvals.only_requester`: whether only the requester may answer their own request.
    pub fn only_requester(self, on: bool) -> Approvals {
        self.edit(|l| l.only_requester = on);
        self
    }

    /// `[[people]]`, for the linked chat of an API conversation (`linked.rs`).
    pub fn people(self, people: Vec<crate::config::Person>) -> Approvals {
        self.edit(|l| l.people = people);
        self
    }

    /// Who may answer a budget extension question (`platform:id` identities).
    pub fn budget_approvers(self, identities: Vec<String>) -> Approvals {
        self.edit(|l| l.budget_approvers = identities);
        self
    }

    /// Takes `approvals.only_requester`, `[[people]]` and `budget.approvers` of a reloaded
    /// configuration, in every clone: the next press and the next question read them.
    pub fn replace(&self, config: &crate::config::Config) {
        let live = Live {
            only_requester: config.approvals.only_requester,
            people: config.people.clone(),
            budget_approvers: super::budget_events::approver_identities(config),
        };
        *self.live.write().expect("approvals config") = Arc::new(live);
    }

    fn edit(&self, f: impl FnOnce(&mut Live)) {
        let mut guard = self.live.write().expect("approvals config");
        let mut live = Live::clone(&guard);
        f(&mut live);
        *guard = Arc::new(live);
    }

    fn live(&self) -> Arc<Live> {
        self.live.read().expect("approvals config").clone()
    }

    /// The name the requester goes by in the chat (their message's sender name), for the
    /// answer another member gets; the sender id when the message cannot be read.
    async fn requester_name(&self, row: &ApprovalRow) -> String {
        let id = Person::parse(&row.person).map_or(String::new(), |p| p.id);
        match self.store.inbox_get(row.inbox_id).await {
            Ok(Some(inbox)) if !inbox.event.sender_name.trim().is_empty() => {
                crate::telemetry::escape(inbox.event.sender_name.trim())
            }
            _ => id,
        }
    }

    /// Answers a request when the presser may; the first answer wins.
    pub async fn press(&self, p: &Press) -> PressOutcome {
        let outcome = self.press_inner(p).await;
        metrics::counter!("herald_approval_presses_total", "platform" => p.platform.to_string(), "outcome" => outcome.as_str()).increment(1);
        tracing::info!(approval = %p.approval_id, platform = %p.platform, sender = %p.sender_id,
            outcome = outcome.as_str(), "approval button pressed");
        outcome
    }

    async fn press_inner(&self, p: &Press) -> PressOutcome {
        let row = match self.store.approval_get(&p.approval_id).await {
            Ok(Some(row)) => row,
            Ok(None) => return PressOutcome::NotOpen,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read an approval request; the press is not recorded");
                return PressOutcome::NotOpen;
            }
        };
        // Only the approval's own chat, and only someone allowed to talk to the agent there.
        // Where threads are chats of their own (Discord), a button in a thread reports the
        // thread (its id is unique, so it cannot name another chat).
        let facts = spec(p.platform);
        let thread_is_chat = facts.is_some_and(|s| s.thread_is_chat);
        let same_chat = row.chat_id == p.chat_id
            || (thread_is_chat && row.thread_id.as_deref() == Some(&p.chat_id));
        if row.platform != p.platform.as_str() || !same_chat {
            return PressOutcome::NotYours;
        }
        let mut ev = MessageEvent::text(p.platform, &p.chat_id, &p.sender_id, "");
        ev.chat_type = ChatType::Group;
        ev.sender_roles = p.sender_roles.clone();
        // The web chat has no sender identity of its own: its callers passed the HTTP guard.
        let local = facts.is_some_and(|s| s.admit == Admit::Local);
        ev.origin = Origin::Person {
            kind: MessageKind::Text,
            from_loopback: local,
        };
        if !self
            .auth
            .is_allowed_or_paired(&ev, self.store.as_ref())
            .await
        {
            return PressOutcome::NotYours;
        }
        let by = Person::new(p.platform, &*p.sender_id).to_string();
        if row.tool == super::budget_events::BUDGET_TOOL {
            return self.press_budget(&row, p, &by).await;
        }
        // The web chat has no per-person identity to compare; its callers passed the guard.
        if self.live().only_requester && !local && row.person != by {
            return PressOutcome::OnlyRequester(self.requester_name(&row).await);
        }
        match self
            .store
            .approval_answer(&p.approval_id, p.approve, &by, now_ms())
            .await
        {
            Ok(true) => {
                self.wake(&p.approval_id);
                if p.approve {
                    PressOutcome::Approved
                } else {
                    PressOutcome::Denied
                }
            }
            Ok(false) => PressOutcome::NotOpen,
            Err(e) => {
                tracing::warn!(error = %e, "cannot record an approval answer");
                PressOutcome::NotOpen
            }
        }
    }

    /// Pending requests of one lane (the web page shows their buttons).
    pub async fn pending(
        &self,
        lane: Option<&crate::domain::LaneKey>,
    ) -> crate::store::StoreResult<Vec<ApprovalRow>> {
        self.store.approvals_pending(lane).await
    }

    /// Closes the requests a turn left open when it ended without their answer (stopped, timed
    /// out): they are denied, and their questions say so. A turn that lost its lease or was
    /// shut down keeps them — its retry resumes the wait.
    pub async fn abandon(&self, lane: &crate::domain::LaneKey, inbox_id: i64, why: &str) {
        let rows = match self.store.approvals_abandon(lane, inbox_id, now_ms()).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "cannot close a turn's open approval requests");
                return;
            }
        };
        for row in rows {
            self.wake(&row.id);
            let platform = Platform::parse(&row.platform);
            let (Some(msg), Some(out)) = (
                row.prompt_message_id.as_deref(),
                platform.and_then(|p| self.outbounds.get(p)),
            ) else {
                continue;
            };
            out.ask_closed(
                &row.chat_id,
                row.thread_id.as_deref(),
                msg,
                &format!("⏹ {why}: {}", row.tool),
            )
            .await;
        }
    }

    fn wake(&self, id: &str) {
        if let Some(n) = self.waiting.lock().expect("approvals lock").get(id) {
            n.notify_waiters();
        }
    }

    fn waiter(&self, id: &str) -> Arc<Notify> {
        self.waiting
            .lock()
            .expect("approvals lock")
            .entry(id.to_string())
            .or_default()
            .clone()
    }

    fn forget(&self, id: &str) {
        self.waiting.lock().expect("approvals lock").remove(id);
    }

    /// The gate of one turn: asks in the chat of the event the turn answers.
    pub fn gate<'a>(&'a self, ev: &'a MessageEvent, clock: &'a TurnClock) -> TurnGate<'a> {
        TurnGate::new(self, ev, clock)
    }
}
