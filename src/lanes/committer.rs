//! Group commit for the lane workers: a turn's start and its commit are queued here, and the
//! steps of every lane that is ready at that moment land in one write transaction
//! ([`TurnStore::turn_steps`]), saving each lane its own `BEGIN` and `COMMIT` round trips.
//!
//! There is no committer task: a worker that queues a step and finds a leader slot free leads
//! a group itself (everything queued, up to [`MAX_GROUP`]); the others wait for their result.
//! So nothing runs when no turn is landing, and shutdown has no task to stop. SQLite has one
//! writer, so one leader at a time; Postgres lets two groups land side by side.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::sync::{oneshot, Semaphore};

use crate::store::{
    InboxAttempt, Lease, SessionId, StepContext, Store, StoreError, StoreResult, TurnCommit,
    TurnCommitted, TurnStep, TurnStepDone,
};

/// Steps landed in one transaction at most: a group that large already saves nearly every
/// `BEGIN`/`COMMIT`, and a larger one keeps its first lane waiting longer.
pub const MAX_GROUP: usize = 64;

struct Queued {
    step: TurnStep,
    done: oneshot::Sender<StoreResult<TurnStepDone>>,
}

pub struct Committer {
    store: std::sync::Arc<dyn Store>,
    queue: Mutex<Vec<Queued>>,
    leaders: Semaphore,
    /// Groups landed and the steps in them, since the start.
    groups: AtomicU64,
    steps: AtomicU64,
}

impl Committer {
    /// Groups for `store`: one leader on SQLite (one writer), two on Postgres.
    pub fn new(store: std::sync::Arc<dyn Store>) -> Committer {
        let leaders = if store.backend() == "sqlite" { 1 } else { 2 };
        Committer {
            store,
            queue: Mutex::new(Vec::new()),
            leaders: Semaphore::new(leaders),
            groups: AtomicU64::new(0),
            steps: AtomicU64::new(0),
        }
    }

    /// Groups landed and the steps in them, since the start.
    pub fn landed(&self) -> (u64, u64) {
        (
            self.groups.load(Ordering::Relaxed),
            self.steps.load(Ordering::Relaxed),
        )
    }

    /// [`TurnStore::turn_begin_with`](crate::store::TurnStore::turn_begin_with), landed with
    /// whatever other lanes have ready.
    pub async fn begin(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        inbox: Option<InboxAttempt>,
        sweep: bool,
    ) -> StoreResult<i64> {
        let step = TurnStep::Begin {
            lease: lease.clone(),
            session_id: session_id.clone(),
            inbox,
            sweep,
        };
        match self.land(step).await? {
            TurnStepDone::Begun(id) => Ok(id),
            TurnStepDone::Committed(_) => Err(StoreError::other("a turn start landed as a commit")),
        }
    }

    /// [`TurnStore::turn_commit_with`](crate::store::TurnStore::turn_commit_with), landed
    /// with whatever other lanes have ready. `context` is owned: another lane's worker may be
    /// the one running it.
    pub async fn commit(
        &self,
        lease: &Lease,
        commit: std::sync::Arc<TurnCommit>,
        context: StepContext,
    ) -> StoreResult<TurnCommitted> {
        let step = TurnStep::Commit {
            lease: lease.clone(),
            commit,
            context,
        };
        match self.land(step).await? {
            TurnStepDone::Committed(c) => Ok(c),
            TurnStepDone::Begun(_) => Err(StoreError::other("a turn commit landed as a start")),
        }
    }

    async fn land(&self, step: TurnStep) -> StoreResult<TurnStepDone> {
        let (done, mut result) = oneshot::channel();
        self.queue
            .lock()
            .expect("group queue lock")
            .push(Queued { step, done });
        loop {
            tokio::select! {
                biased;
                r = &mut result => return r.unwrap_or_else(|_| Err(interrupted())),
                permit = self.leaders.acquire() => {
                    let _permit = permit.expect("the leader semaphore is never closed");
                    let group = self.take();
                    if group.is_empty() {
                        // Another leader took this step and is landing it.
                        drop(_permit);
                        return result.await.unwrap_or_else(|_| Err(interrupted()));
                    }
                    self.lead(group).await;
                }
            }
        }
    }

    /// The oldest queued steps, up to [`MAX_GROUP`].
    fn take(&self) -> Vec<Queued> {
        let mut queue = self.queue.lock().expect("group queue lock");
        let n = queue.len().min(MAX_GROUP);
        queue.drain(..n).collect()
    }

    async fn lead(&self, group: Vec<Queued>) {
        metrics::histogram!("herald_group_commit_steps").record(group.len() as f64);
        self.groups.fetch_add(1, Ordering::Relaxed);
        self.steps.fetch_add(group.len() as u64, Ordering::Relaxed);
        let (steps, senders): (Vec<_>, Vec<_>) =
            group.into_iter().map(|q| (q.step, q.done)).unzip();
        let results = self.store.turn_steps(steps).await;
        for (done, r) in senders.into_iter().zip(results) {
            // A worker that stopped waiting (its turn was cancelled) no longer wants it.
            let _ = done.send(r);
        }
    }
}

/// The leader landing this step stopped before it answered (its turn was cancelled): whether
/// the step landed is unknown, as after a single-lane commit that failed.
fn interrupted() -> StoreError {
    StoreError::other("the group commit landing this step was interrupted")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::store::Session;

    /// Lanes that start turns at the same moment share transactions, and each gets its own
    /// turn; a lane whose lease moved on is refused without failing the rest.
    #[tokio::test]
    async fn lanes_ready_together_land_together() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("h.db").display());
        let store = crate::store::connect(&url, 2).await.unwrap();
        store.migrate().await.unwrap();
        let mut lanes = Vec::new();
        for i in 0..12 {
            let lane = format!("web:c{i}");
            let lease = store
                .lease_acquire(&lane, "w", Duration::from_secs(60))
                .await
                .unwrap()
                .unwrap();
            let session = Session::new(
                format!("s{i}"),
                lane.as_str().into(),
                0,
                "p".to_string(),
                "m".to_string(),
            );
            store.session_create(&lease, &session).await.unwrap();
            lanes.push((lease, session.id));
        }
        lanes[5].0.token += 1; // a stale holder
        let committer = Arc::new(Committer::new(store.clone()));
        let starts = lanes.iter().map(|(lease, session)| {
            let c = committer.clone();
            async move { c.begin(lease, session, None, false).await }
        });
        let results = futures::future::join_all(starts).await;
        for (i, r) in results.iter().enumerate() {
            match (i, r) {
                (5, Err(StoreError::LeaseLost { .. })) => {}
                (5, other) => panic!("the stale holder's start: {other:?}"),
                (_, Ok(_)) => {}
                (_, Err(e)) => panic!("lane {i}: {e}"),
            }
        }
        let ids: std::collections::HashSet<_> = results.iter().flatten().collect();
        assert_eq!(ids.len(), 11);
        let (groups, steps) = committer.landed();
        assert_eq!(steps, 12);
        assert!(
            groups < 12,
            "twelve starts ready together landed in {groups} groups"
        );
    }
}
