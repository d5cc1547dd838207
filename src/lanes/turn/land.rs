//! Step 4 of a turn: the one lease-checked commit (transcript rows, outbox rows, inbox mark,
//! the context row anchored on the billed usage), the outbox sender's wake, and what the worker
//! keeps of the session so the next turn reads nothing back.

use std::sync::Arc;

use tracing::Instrument;

use super::{Prepared, Settled};
use crate::agent::context::{ContextEngine, Known};
use crate::lanes::worker::{Failure, Worker};
use crate::store::{Lease, StoredMessage};

impl Worker {
    pub(super) async fn land(
        &self,
        lease: &Lease,
        context: &ContextEngine<'_>,
        p: Prepared,
        settled: Settled,
        span: &tracing::Span,
    ) -> Result<(), Failure> {
        let deps = &self.router.deps;
        let Settled {
            commit, readings, ..
        } = settled;
        let Prepared {
            session, before, ..
        } = p;
        // The usage anchor names a committed row, so it is computed inside the commit, from
        // the ids the commit assigns, and lands in the same transaction. Owned: the commit may
        // land in a group another lane's worker leads.
        let commit = Arc::new(commit);
        let anchor = {
            let (anchoring, row, session_id) =
                (context.anchoring(), before.row.clone(), session.id.clone());
            let commit = commit.clone();
            move |ids: &[i64]| {
                anchoring.anchor_after(row.clone(), &session_id, &commit.messages, ids, &readings)
            }
        };
        let committed = deps
            .committer
            .commit(lease, commit.clone(), Box::new(anchor))
            .instrument(tracing::info_span!(parent: span, "store.turn_commit", outbox_rows = commit.outbox.len()))
            .await?;
        deps.outbox_wake.notify_one();
        if !commit.steered.is_empty() {
            for id in &commit.steered {
                self.router.finish(*id).await;
            }
            // The worker's batch of pending rows holds them still: it reads the inbox again.
            self.reread.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if commit.close_session.is_none() {
            let Known { mut live, row } = before;
            let now = crate::store::now_ms();
            live.extend(
                commit
                    .messages
                    .iter()
                    .zip(&committed.message_ids)
                    .map(|(m, id)| StoredMessage::committed(*id, &session.id, m, now)),
            );
            let row = committed.context.unwrap_or(row);
            *self.known.lock().expect("known lock") = Some((session, Known { live, row }));
        }
        Ok(())
    }
}
