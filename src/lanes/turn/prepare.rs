//! Step 1 of a turn: the session (the one the worker knows, or the store's, or a new one), the
//! turn row that checks the lease and records this attempt, the context view (compacted when
//! it must be), and the pre-LLM hooks' version of the person's message.

use tracing::Instrument;

use super::{Prepared, UserMessage};
use crate::agent::context::{ContextEngine, Prepared as View};
use crate::domain::MessageEvent;
use crate::hooks::PreLlmContext;
use crate::lanes::worker::{Failure, Worker};
use crate::store::{InboxAttempt, InboxRow, Lease};

impl Worker {
    pub(super) async fn prepare(
        &self,
        lease: &Lease,
        row: &InboxRow,
        ev: &MessageEvent,
        (user, meter, agent): (
            UserMessage,
            crate::budget::TurnMeter,
            std::sync::Arc<crate::agent::roster::Agent>,
        ),
        context: &ContextEngine<'_>,
        span: &tracing::Span,
    ) -> Result<Prepared, Failure> {
        let deps = &self.router.deps;
        // Taken, not borrowed: a turn that fails anywhere leaves the worker knowing nothing.
        let cached = self.known.lock().expect("known lock").take();
        // A session of another agent (a reload moved the chat, or `/agent`) is not this one's.
        let cached = cached.filter(|(s, _)| s.agent == agent.name);
        let (session, known) = match cached {
            Some((s, k)) => (s, Some(k)),
            None => {
                let s = self
                    .session(lease, ev, &agent)
                    .instrument(tracing::info_span!(parent: span, "store.session"))
                    .await?;
                (s, None)
            }
        };
        span.record("session", session.id.as_str());
        // The turn row is the lease's in-transaction check: a takeover shows here first. The
        // attempt was counted when the worker took the row (`inbox_take`); the start stores it
        // again only as a floor (`attempts < n`), so it never adds a count.
        let attempt = InboxAttempt {
            id: row.id,
            attempt: row.attempts + 1,
        };
        let turn_id = deps
            .committer
            .begin(
                lease,
                &session.id,
                Some(attempt),
                self.open_turn
                    .swap(false, std::sync::atomic::Ordering::SeqCst),
            )
            .instrument(tracing::info_span!(parent: span, "lease.turn_begin", lease.holder = %lease.holder, lease.token = lease.token))
            .await?;
        span.record("turn", turn_id);
        let tools = agent.tools(&deps.tools.snapshot());
        let View {
            view: history,
            known: before,
        } = context
            .prepare_with(lease, &session, &user.content, &tools, known)
            .instrument(tracing::info_span!(parent: span, "context.prepare"))
            .await?;
        // The first turn of a session is the first request a person wrote in it: a brief
        // mirrored into a fresh session writes a synthetic user row, which must not count.
        let first_turn = !history.iter().any(|m| m.is_person_request());
        let api_content = deps
            .pre_llm
            .api_content(
                &user.content,
                &PreLlmContext {
                    lane: &self.lane,
                    session_id: &session.id,
                    first_turn,
                    event: ev,
                    agent: &agent.name,
                },
            )
            .instrument(tracing::info_span!(parent: span, "hooks.pre_llm"))
            .await;
        let history_images = self
            .history_images(&history)
            .instrument(tracing::info_span!(parent: span, "media.history"))
            .await;
        Ok(Prepared {
            agent,
            session,
            turn_id,
            tools,
            history,
            before,
            user,
            api_content,
            history_images,
            meter,
            steered: Vec::new(),
        })
    }
}
