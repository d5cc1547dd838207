//! A model turn inside a lane worker, as four steps with typed hand-offs:
//!
//! 1. [`prepare`](prepare.rs): the session, the lease-checked turn row, the context view and
//!    the pre-LLM hooks' content → [`Prepared`];
//! 2. [`run`](run.rs): the agent loop under the turn deadline, `/stop`, lease loss and shutdown,
//!    with previews and the typing indicator; a provider-confirmed overflow compacts and retries
//!    once → [`Outcome`];
//! 3. [`settle`](settle.rs): the outcome becomes the transcript rows, the reply and its
//!    delivery plan → [`Settled`];
//! 4. [`land`](land.rs): the one lease-checked commit, the outbox wake, and what the worker
//!    keeps of the session for the next turn.
//!
//! A feature that lives inside a turn (media, budgets, steering) adds a function to one step,
//! not a branch to a long body.

mod budget;
mod land;
mod media;
mod prepare;
mod run;
mod settle;

pub use settle::OVER_BUDGET;

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::worker::{Failure, Stop, Worker};
use crate::agent::context::{ContextEngine, Known};
use crate::agent::tools::Tools;
use crate::agent::turn::{TurnError, TurnOutput};
use crate::domain::{Attachment, MessageEvent};
use crate::llm::Part;
use crate::media::images::HistoryImages;
use crate::media::Reading;
use crate::store::{InboxRow, InboxStatus, Lease, NewMessage, Session, StoredMessage, TurnCommit};

/// What `prepare` hands to `run`: the turn's session and row, its tools and context.
struct Prepared {
    /// The agent this turn runs as, read once at its start: a reload never changes it.
    agent: std::sync::Arc<crate::agent::roster::Agent>,
    session: Session,
    turn_id: i64,
    /// The turn's tool list: MCP servers that came or went since the last turn show here.
    tools: Tools,
    /// The history the model sees (after any compaction).
    history: Vec<StoredMessage>,
    /// The session's live rows and context row before this turn (the commit extends them).
    before: Known,
    /// The person's message as the turn reads it: their words and what their files say.
    user: UserMessage,
    /// The pre-LLM hooks' version of `user.content` (recall, capsule), when they changed it.
    api_content: Option<String>,
    /// The history's images still in view.
    history_images: HistoryImages,
    /// Reserves and settles the turn's model calls under the caps that apply to its payer.
    meter: crate::budget::TurnMeter,
    /// Later inbox rows that joined the turn mid-way (`lanes.mid_turn`), with their user rows.
    steered: Vec<(i64, NewMessage)>,
}

/// The user row of the turn: the person's words followed by the lines their attachments
/// gave, the attachments by reference, and this turn's image parts.
struct UserMessage {
    content: String,
    media: Vec<Attachment>,
    parts: Vec<Part>,
}

impl UserMessage {
    fn new(ev: &MessageEvent, reading: Reading) -> UserMessage {
        UserMessage {
            content: reading.compose(&ev.text),
            media: reading.attachments,
            parts: reading.parts,
        }
    }
}

/// How `run` ended.
enum Outcome {
    Done(Result<TurnOutput, TurnError>),
    TimedOut(Duration),
    Stopped,
    /// A new message from the same person stopped the turn (`lanes.mid_turn = "interrupt"`).
    Interrupted,
    Abandoned(Stop),
}

/// What `settle` hands to `land`: the commit to write and what the context engine needs
/// to anchor its estimate.
struct Settled {
    commit: TurnCommit,
    status: InboxStatus,
    /// Billed prompt tokens of each answered request.
    readings: Vec<u64>,
}

impl Worker {
    pub(super) async fn turn(
        &self,
        lease: &Lease,
        row: &InboxRow,
        ev: &MessageEvent,
        lost: &CancellationToken,
    ) -> Result<(), Failure> {
        let deps = &self.router.deps;
        let started = Instant::now();
        // A root span: one trace per turn (the worker's `lane` span lives for many turns).
        let span = tracing::info_span!(
            parent: None,
            "turn",
            lane = %self.lane,
            platform = %ev.platform,
            inbox_id = row.id,
            session = tracing::field::Empty,
            turn = tracing::field::Empty,
            agent = tracing::field::Empty,
        );
        let agent = deps
            .agents
            .for_turn(deps.store.as_ref(), &self.lane, ev)
            .await;
        span.record("agent", agent.name.as_str());
        let agent_label = agent.name.clone();
        // The memory provider hears about a compaction of a private chat before it is written.
        let person = deps.recall.as_ref().and_then(|r| r.person_of(ev));
        let notice = |sid: &str, rows: &[StoredMessage]| {
            if let (Some(r), Some(p)) = (&deps.recall, &person) {
                r.notify_compaction(p, sid, rows);
            }
        };
        let mut context = ContextEngine::new(deps.store.as_ref(), &agent.config).await;
        context.on_compact = Some(&notice);

        let reading = self.read_media(ev, &span).await;
        if reading.all_failed() && ev.text.trim().is_empty() {
            return self.unreadable(lease, row, ev, (reading, &agent)).await;
        }
        let user = UserMessage::new(ev, reading);
        let meter = self.meter(ev, &agent).await;
        let mut prepared = self
            .prepare(lease, row, ev, (user, meter, agent), &context, &span)
            .await?;
        let outcome = if crate::domain::cron::is_hook_notify(ev) {
            // A `notify` webhook: its rendered text is the brief; no model call.
            Outcome::Done(Ok(TurnOutput::text(&ev.text)))
        } else {
            self.run_agent(lease, row, ev, &context, &mut prepared, lost, &span)
                .await
        };
        let settled = self.settle(row, ev, &prepared, outcome, &span).await?;
        let status = settled.status;
        self.land(lease, &context, prepared, settled, &span).await?;

        let secs = started.elapsed().as_secs_f64();
        metrics::counter!("herald_turns_total", "platform" => ev.platform.to_string(), "status" => status.as_str(), "agent" => agent_label.clone()).increment(1);
        metrics::histogram!("herald_turn_duration_seconds", "platform" => ev.platform.to_string(), "agent" => agent_label)
            .record(secs);
        tracing::info!(parent: &span, status = status.as_str(), duration_ms = (secs * 1000.0) as u64, "turn finished");
        Ok(())
    }
}
