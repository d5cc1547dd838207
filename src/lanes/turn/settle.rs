//! Step 3 of a turn: what the outcome means for the person. The transcript rows (the person's
//! message always; the model's messages when it answered), the reply line, the inbox status,
//! and where the reply goes (the chat, a scheduled run's targets, or nowhere).

use super::{Outcome, Prepared, Settled};
use crate::agent::turn::TurnError;
use crate::domain::{Attachment, MessageEvent, Platform, Role};
use crate::lanes::worker::{Failure, Worker};
use crate::llm::LlmError;
use crate::store::{InboxRow, InboxStatus, NewMessage, TurnCommit};

/// The start of the inbox note of a turn a spending cap refused (`herald cron log` shows it).
pub const OVER_BUDGET: &str = "over budget";

/// The reply and the rows the outcome adds after the person's message.
struct Answer {
    reply: String,
    status: InboxStatus,
    note: Option<String>,
    messages: Vec<NewMessage>,
    readings: Vec<u64>,
    /// Files the model attached to the reply, sent after its text.
    files: Vec<Attachment>,
}

impl Worker {
    pub(super) async fn settle(
        &self,
        row: &InboxRow,
        ev: &MessageEvent,
        p: &Prepared,
        outcome: Outcome,
        span: &tracing::Span,
    ) -> Result<Settled, Failure> {
        // An answer holds the rows that joined mid-turn in their places; any other outcome
        // ends with them after the person's first message.
        let answered = matches!(outcome, Outcome::Done(Ok(_)));
        let mut answer = self.answer(row, ev, outcome, span).await?;
        if !answered {
            let joined = p.steered.iter().map(|(_, m)| m.clone());
            answer.messages.splice(0..0, joined);
        }
        let mut user = NewMessage::new(Role::User, p.user.content.clone());
        user.media = p.user.media.clone();
        user.api_content = p.api_content.clone();
        user.platform_message_id = Some(ev.platform_message_id.clone());
        let mut commit = TurnCommit::new(p.turn_id, &p.session.id, Some(row.id), answer.status);
        commit.steered = p.steered.iter().map(|(id, _)| *id).collect();
        commit.messages = std::iter::once(user)
            .chain(std::mem::take(&mut answer.messages))
            .collect();
        commit.note = answer.note.take();
        if answered {
            let deps = &self.router.deps;
            let spoken =
                crate::lanes::voice::speak(deps, &self.lane, ev, &answer.reply, &p.meter).await;
            answer.files.splice(0..0, spoken);
        }
        p.meter.release_open().await;
        let spent = p.meter.spent();
        commit.billed = spent.billed;
        commit.cost = spent.cost.filter(|_| spent.calls > 0);
        self.plan_reply(row, ev, &answer, &mut commit, span);
        if ev.platform == Platform::CRON {
            // Each scheduled fire is its own session.
            commit.close_session = Some("cron_fire".into());
        }
        Ok(Settled {
            commit,
            status: answer.status,
            readings: answer.readings,
        })
    }

    /// The outcome as a reply line and an inbox status. A turn that ended before an answer
    /// (stopped, out of time) abandons its open approval questions first.
    async fn answer(
        &self,
        row: &InboxRow,
        ev: &MessageEvent,
        outcome: Outcome,
        span: &tracing::Span,
    ) -> Result<Answer, Failure> {
        let deps = &self.router.deps;
        let why = match &outcome {
            Outcome::Stopped => Some("Stopped"),
            Outcome::Interrupted => Some("Interrupted by a newer message"),
            Outcome::TimedOut(_) => Some("The turn ran out of time"),
            _ => None,
        };
        if let Some(why) = why {
            deps.approvals.abandon(&self.lane, row.id, why).await;
        }
        let line = |reply: String, status, note: Option<&str>| Answer {
            reply,
            status,
            note: note.map(str::to_string),
            messages: Vec::new(),
            readings: Vec::new(),
            files: Vec::new(),
        };
        Ok(match outcome {
            Outcome::Abandoned(s) => return Err(Failure::Stop(s)),
            Outcome::Done(Ok(out)) => Answer {
                reply: out.reply,
                status: InboxStatus::Done,
                note: None,
                messages: out.messages,
                readings: out.prompt_readings,
                files: out.files,
            },
            Outcome::Done(Err(TurnError::Llm(LlmError::NotConfigured)))
                if ev.deliver_to().is_empty() =>
            {
                // Not a failure of this message: the setup line is the answer, kept in the
                // transcript like any reply (the web chat shows it after a reload too). A
                // scheduled run still fails: a setup line is no brief to deliver.
                let text = crate::llm::NOT_CONFIGURED_REPLY.to_string();
                let mut a = line(text.clone(), InboxStatus::Done, Some("no model configured"));
                a.messages.push(NewMessage::new(Role::Assistant, text));
                a
            }
            Outcome::Done(Err(TurnError::Llm(LlmError::OverBudget(why)))) => {
                // A cron fire over its cap is skipped (the ledger says why; the next fire
                // tries again); a person gets the one line, nothing half-done.
                let status = if matches!(ev.origin, crate::domain::Origin::Scheduled { .. }) {
                    InboxStatus::Skipped
                } else {
                    InboxStatus::Failed
                };
                let note = format!("{OVER_BUDGET}: {why}");
                line(why, status, Some(&note))
            }
            Outcome::Done(Err(TurnError::Llm(e))) => {
                tracing::warn!(parent: span, error = %e, class = e.class(), "turn failed; the user gets an error line");
                line(e.user_message(), InboxStatus::Failed, Some(&e.to_string()))
            }
            Outcome::TimedOut(budget) => line(
                format!(
                    "The model did not finish within {} seconds; please try again (your message was kept).",
                    budget.as_secs()
                ),
                InboxStatus::Failed,
                Some("turn timed out"),
            ),
            // `/stop` answers for it: one message, not two.
            Outcome::Stopped => {
                self.router
                    .stopped
                    .lock()
                    .expect("stopped lock")
                    .insert(self.lane.clone());
                line(String::new(), InboxStatus::Done, Some("stopped"))
            }
            // The newer message's turn answers; this one ends without a reply.
            Outcome::Interrupted => line(String::new(), InboxStatus::Done, Some("interrupted")),
        })
    }

    /// Where the reply goes: this chat (its text, then its files), or a scheduled run's
    /// targets when it succeeded (the text only).
    fn plan_reply(
        &self,
        row: &InboxRow,
        ev: &MessageEvent,
        answer: &Answer,
        commit: &mut TurnCommit,
        span: &tracing::Span,
    ) {
        let (reply, status) = (answer.reply.as_str(), answer.status);
        match (reply.is_empty(), ev.deliver_to().is_empty()) {
            // A stopped or interrupted turn: `/stop` or the newer turn answers.
            (true, _) => {}
            (false, true) => {
                commit.outbox = self.outbox_rows(row, reply, "turn");
                let files = crate::lanes::reply::file_rows(
                    &self.lane,
                    row,
                    &answer.files,
                    commit.outbox.len(),
                );
                commit.outbox.extend(files);
            }
            (false, false) if status == InboxStatus::Done => {
                self.plan_delivery(row, ev, reply, commit)
            }
            (false, false) => {
                tracing::warn!(parent: span, "scheduled run failed; nothing delivered")
            }
        }
    }
}
