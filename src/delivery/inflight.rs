//! The sender's lanes in flight: one task per lane, so one long reply leaving at a chat's
//! pace never holds back the replies of other lanes claimed after it.
//!
//! A lane has at most one task here (one row at a time, in order). Rows the claim returns for
//! a lane whose task is still finishing wait here and start when it ends. The count of claimed
//! rows not yet finished bounds what the sender claims next, so the rows it holds never exceed
//! `outbox.batch`.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::Instant;

use tokio::task::{Id, JoinSet};

use crate::store::OutboxRow;

/// Rows of one lane from one or more claims, in id order, and when the oldest was claimed.
pub(super) struct Claimed {
    pub at: Instant,
    pub rows: Vec<OutboxRow>,
}

#[derive(Default)]
pub(super) struct InFlight {
    tasks: JoinSet<()>,
    /// Each task's lane and how many rows it was given.
    by_task: HashMap<Id, (String, usize)>,
    running: HashSet<String>,
    queued: HashMap<String, Claimed>,
    /// Claimed rows not finished yet: those of running tasks and the queued ones.
    outstanding: usize,
}

impl InFlight {
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty() && self.queued.is_empty()
    }

    /// Splits a claim by lane (rows stay in id order) and starts each lane that has no task
    /// here; the rows of a lane still running wait for it.
    pub fn add<F, Fut>(&mut self, at: Instant, rows: Vec<OutboxRow>, start: &F)
    where
        F: Fn(Claimed) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.outstanding += rows.len();
        let mut by_lane: Vec<(String, Vec<OutboxRow>)> = Vec::new();
        for r in rows {
            let lane = r.lane.to_string();
            match by_lane.iter_mut().find(|(l, _)| *l == lane) {
                Some((_, rows)) => rows.push(r),
                None => by_lane.push((lane, vec![r])),
            }
        }
        for (lane, rows) in by_lane {
            if self.running.contains(&lane) {
                let q = self.queued.entry(lane).or_insert(Claimed {
                    at,
                    rows: Vec::new(),
                });
                q.rows.extend(rows);
            } else {
                self.spawn(lane, Claimed { at, rows }, start);
            }
        }
    }

    fn spawn<F, Fut>(&mut self, lane: String, claimed: Claimed, start: &F)
    where
        F: Fn(Claimed) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let n = claimed.rows.len();
        let handle = self.tasks.spawn(start(claimed));
        self.running.insert(lane.clone());
        self.by_task.insert(handle.id(), (lane, n));
    }

    /// Waits for one lane's task to end and starts the rows queued behind it. Pending forever
    /// when no task runs (for `select!` with a guard).
    pub async fn join_next<F, Fut>(&mut self, start: &F)
    where
        F: Fn(Claimed) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let id = match self.tasks.join_next_with_id().await {
            Some(Ok((id, ()))) => id,
            Some(Err(e)) => {
                tracing::error!(error = %e, "an outbox lane's delivery task failed");
                e.id()
            }
            None => return std::future::pending().await,
        };
        let Some((lane, n)) = self.by_task.remove(&id) else {
            return;
        };
        self.outstanding -= n;
        self.running.remove(&lane);
        if let Some(next) = self.queued.remove(&lane) {
            self.spawn(lane, next, start);
        }
    }
}
