//! One inbox row, from the worker's take to its end: the attempt is counted durably before any
//! work (hooks, media, the turn), so a crash anywhere in it counts; past `inbox.max_attempts`
//! the row is dead-lettered (`control.rs::give_up`) and the lane moves on; a store that refuses
//! the turn's writes counts an attempt, one that is unreachable is waited out. Then the
//! pre-dispatch chain and the dispatch: a control event, a command or a turn.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::commands::parse_command;
use super::worker::{Failure, Stop, Worker};
use crate::domain::{MessageKind, Origin};
use crate::hooks::Dispatch;
use crate::store::{InboxRow, Lease, StoreError};

impl Worker {
    pub(super) async fn process(
        &self,
        lease: &Lease,
        mut row: InboxRow,
        lost: &CancellationToken,
    ) -> Result<(), Stop> {
        let deps = &self.router.deps;
        let max = deps.config.inbox.max_attempts;
        let mut backoff =
            crate::tasks::Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
        // Attempts count starts of processing, stored by `inbox_take` before any work (hooks,
        // media, the turn's start), so a start that crashes the process is counted as well;
        // and store refusals within one start: a store that is unreachable is waited out
        // (nothing could be saved anyway), but one that answers and refuses this event's
        // writes will refuse them again, so each refusal is a new start, taken and counted,
        // and the event ends dead-lettered with a reply instead of in a loop.
        // `row.attempts` keeps its meaning for the turn: the starts before this one.
        let mut refused = None;
        let mut take = true;
        loop {
            if take {
                match self.take(lease, &row, lost).await? {
                    Some(n) => row.attempts = n - 1,
                    // Answered meanwhile (a turn took it in, or `/status` at ingest).
                    None => return Ok(()),
                }
                take = false;
            }
            let done = if row.attempts >= max {
                self.give_up(&row, row.attempts, refused.as_ref()).await
            } else {
                self.process_once(lease, &row, lost).await
            };
            if matches!(done, Err(Failure::Store(_))) {
                self.open_turn.store(true, Ordering::SeqCst);
            }
            match done {
                Ok(()) => {
                    self.router.finish(row.id).await;
                    return Ok(());
                }
                Err(Failure::Stop(s)) => return Err(s),
                Err(Failure::Store(StoreError::LeaseLost { .. })) => return Err(Stop::LeaseLost),
                Err(Failure::Store(StoreError::Unavailable(e))) => {
                    tracing::warn!(error = %e, inbox_id = row.id, "store unavailable during a turn; retrying");
                }
                Err(Failure::Store(e)) => {
                    metrics::counter!("herald_turn_store_refusals_total").increment(1);
                    tracing::warn!(error = %e, inbox_id = row.id, attempts = row.attempts + 1, max,
                        "the store refused this event's turn; counted as an attempt");
                    refused = Some(e);
                    take = true;
                }
            }
            tokio::select! {
                _ = self.router.abort.cancelled() => return Err(Stop::Shutdown),
                _ = lost.cancelled() => return Err(Stop::LeaseLost),
                _ = tokio::time::sleep(backoff.next_delay()) => {}
            }
        }
    }

    /// [`InboxStore::inbox_take`](crate::store::InboxStore::inbox_take), waiting out an
    /// unreachable store: the new attempt count, or `None` when the row is no longer pending.
    async fn take(
        &self,
        lease: &Lease,
        row: &InboxRow,
        lost: &CancellationToken,
    ) -> Result<Option<i64>, Stop> {
        let mut backoff =
            crate::tasks::Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
        loop {
            match self.router.deps.store.inbox_take(lease, row.id).await {
                Ok(n) => return Ok(n),
                Err(StoreError::LeaseLost { .. }) => return Err(Stop::LeaseLost),
                Err(e) => {
                    tracing::warn!(error = %e, inbox_id = row.id, "cannot count the event's attempt; retrying")
                }
            }
            tokio::select! {
                _ = self.router.abort.cancelled() => return Err(Stop::Shutdown),
                _ = lost.cancelled() => return Err(Stop::LeaseLost),
                _ = tokio::time::sleep(backoff.next_delay()) => {}
            }
        }
    }

    async fn process_once(
        &self,
        lease: &Lease,
        row: &InboxRow,
        lost: &CancellationToken,
    ) -> Result<(), Failure> {
        let deps = &self.router.deps;
        let ev = match deps.pre_dispatch.run(&row.event).await {
            Dispatch::Skip {
                hook,
                reason,
                reply,
            } => {
                return self.skip(row, &format!("{hook}: {reason}"), reply).await;
            }
            Dispatch::Turn(ev) => *ev,
        };
        match &ev.origin {
            Origin::Control(control) => {
                self.forget();
                self.control(lease, row, &ev, control).await
            }
            Origin::Person {
                kind: MessageKind::Edited | MessageKind::Service,
                ..
            } => {
                self.skip(row, "not a message the agent answers", None)
                    .await
            }
            Origin::Person {
                kind: MessageKind::Text | MessageKind::Command | MessageKind::Media,
                ..
            } => match parse_command(&ev.text, None) {
                Some(cmd) => {
                    self.forget();
                    self.command(lease, row, cmd).await
                }
                None => self.turn(lease, row, &ev, lost).await,
            },
            // A scheduled run never runs a command, whatever its prompt says.
            Origin::Scheduled { .. } => self.turn(lease, row, &ev, lost).await,
        }
    }
}
