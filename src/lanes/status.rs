//! `/status`: answered at once, beside the lane's running turn, not behind it — people send it
//! precisely when a lane seems stuck.
//!
//! The answer names what the running turn is doing when this process runs it (model call,
//! which tool, a wait for approval), and what the store knows when another replica does. The
//! command's inbox row is closed with its reply in one store write; the worker, which would
//! answer a row this path never got to, derives the same outbox key, so the reply is queued
//! once whichever side gets there first. Nothing else of the lane changes. A group member's
//! `/stop` refused because another member's turn runs is answered at once the same way.

use std::sync::Arc;

use super::activity::{clock, secs};
use super::commands::STOP_REFUSED;
use super::reply::reply_rows;
use super::router::LaneRouter;
use crate::domain::LaneKey;
use crate::store::{now_ms, InboxStatus, StoreError};

impl LaneRouter {
    /// Answers the `/status` event `inbox_id` now; on any failure the lane's worker answers it.
    pub(super) async fn answer_status(self: Arc<Self>, lane: LaneKey, inbox_id: i64) {
        match self.try_answer_status(&lane, inbox_id).await {
            Ok(()) => {
                self.finish(inbox_id).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, lane = %lane, "could not answer /status at once; the lane's worker will");
                self.dispatch(lane);
            }
        }
    }

    /// A group member's `/stop` found another member's turn running: their command is answered
    /// now with the refusal, the same way; on failure the worker answers it once it gets there.
    pub(super) async fn answer_refused_stop(
        self: Arc<Self>,
        lane: LaneKey,
        sender: String,
        inbox: i64,
    ) {
        let answered = self
            .try_answer(&lane, inbox, async || Ok(STOP_REFUSED.to_string()))
            .await;
        match answered {
            Ok(()) => {
                self.refused_stops
                    .lock()
                    .expect("refused lock")
                    .remove(&(lane, sender));
                self.finish(inbox).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, lane = %lane, "could not answer a refused /stop at once; the lane's worker will");
            }
        }
    }

    async fn try_answer_status(&self, lane: &LaneKey, inbox_id: i64) -> Result<(), StoreError> {
        self.try_answer(lane, inbox_id, async || self.status_text(lane).await)
            .await
    }

    /// Closes the pending command row `inbox_id` with the reply `text` makes, in one write.
    async fn try_answer(
        &self,
        lane: &LaneKey,
        inbox_id: i64,
        text: impl AsyncFnOnce() -> Result<String, StoreError>,
    ) -> Result<(), StoreError> {
        let store = &self.deps.store;
        let Some(row) = store.inbox_get(inbox_id).await? else {
            return Ok(());
        };
        if row.status != InboxStatus::Pending {
            return Ok(());
        }
        let text = text().await?;
        let rows = reply_rows(&self.deps, lane, &row, &text, "skip");
        store.inbox_skip(inbox_id, "command", &rows).await?;
        self.deps.outbox_wake.notify_one();
        Ok(())
    }

    /// The `/status` answer: the session, what runs now, and what waits.
    pub(super) async fn status_text(&self, lane: &LaneKey) -> Result<String, StoreError> {
        let store = &self.deps.store;
        let session = store.session_current(lane).await?;
        // The `/status` row itself is pending too.
        let pending = store
            .inbox_pending(lane, 100)
            .await?
            .len()
            .saturating_sub(1);
        let mut out = match session {
            Some(s) => {
                let n = store.messages(&s.id, true).await?.len();
                format!(
                    "Session {} ({} messages, since {}), model {}, {} message(s) queued.",
                    s.id,
                    n,
                    chrono::DateTime::from_timestamp_millis(s.started_at)
                        .map(|t| t.to_rfc3339())
                        .unwrap_or_default(),
                    s.model,
                    pending
                )
            }
            None => format!("No session yet; {pending} message(s) queued."),
        };
        out.push('\n');
        out.push_str(&self.running_line(lane, pending).await?);
        Ok(out)
    }

    async fn running_line(&self, lane: &LaneKey, pending: usize) -> Result<String, StoreError> {
        let local = self
            .activity
            .lock()
            .expect("activity lock")
            .get(lane)
            .cloned();
        if let Some(a) = local {
            return Ok(a.describe());
        }
        // Another replica may hold the lane: its lease is what the store knows.
        let lease = self
            .deps
            .store
            .lease_get(lane.as_str())
            .await?
            .filter(|l| l.expires_at > now_ms());
        let mine = format!("{}/", self.deps.replica_id);
        Ok(match lease {
            Some(l) if pending > 0 && !l.holder.starts_with(&mine) => {
                let replica = l.replica();
                format!(
                    "A turn is running on replica {replica} (it has held this conversation since {}, {} ago).",
                    clock(l.acquired_at),
                    secs(now_ms() - l.acquired_at)
                )
            }
            _ if pending > 0 => {
                "Nothing is running right now; the queued messages start soon.".into()
            }
            _ => "Nothing is running right now.".into(),
        })
    }
}
