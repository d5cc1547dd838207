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

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::task::JoinError;

use crate::store::OutboxRow;

/// Rows of one lane from one or more claims, in id order, and when the oldest was claimed.
pub(super) struct Claimed {
    pub at: Instant,
    pub rows: Vec<OutboxRow>,
}

/// A lane's task as `tasks::spawn_owned` runs it (aborted when dropped), ending in its lane
/// and how many rows it was given.
type LaneTask = BoxFuture<'static, (String, usize, Result<(), JoinError>)>;

#[derive(Default)]
pub(super) struct InFlight {
    tasks: FuturesUnordered<LaneTask>,
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
        let handle = crate::tasks::spawn_owned(start(claimed));
        self.running.insert(lane.clone());
        self.tasks
            .push(Box::pin(async move { (lane, n, handle.await) }));
    }

    /// Waits for one lane's task to end and starts the rows queued behind it. Pending forever
    /// when no task runs (for `select!` with a guard).
    pub async fn join_next<F, Fut>(&mut self, start: &F)
    where
        F: Fn(Claimed) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some((lane, n, ended)) = self.tasks.next().await else {
            return std::future::pending().await;
        };
        if let Err(e) = ended {
            tracing::error!(error = %e, lane, "an outbox lane's delivery task failed");
        }
        self.outstanding -= n;
        self.running.remove(&lane);
        if let Some(next) = self.queued.remove(&lane) {
            self.spawn(lane, next, start);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tokio::sync::Notify;

    use super::*;
    use crate::domain::{LaneKey, Platform};
    use crate::store::OutboxStatus;

    fn row(id: i64, lane: &str) -> OutboxRow {
        OutboxRow {
            id,
            idem_key: format!("k{id}"),
            reply_key: None,
            lane: LaneKey::parse(lane),
            platform: Platform::named("telegram"),
            chat_id: lane.to_string(),
            thread_id: None,
            reply_to: None,
            inbox_id: None,
            chunk_index: 0,
            text: String::new(),
            status: OutboxStatus::Sending,
            attempts: 0,
            platform_message_id: None,
            last_error: None,
            created_at: 0,
            sent_at: None,
            media: None,
        }
    }

    #[tokio::test]
    async fn a_lane_has_one_task_and_rows_claimed_meanwhile_wait_behind_it() {
        let started: Arc<Mutex<Vec<Vec<i64>>>> = Arc::default();
        let gate = Arc::new(Notify::new());
        let start = |c: Claimed| {
            let (started, gate) = (started.clone(), gate.clone());
            async move {
                let slow = c.rows[0].lane.as_str() == "telegram:1";
                started
                    .lock()
                    .unwrap()
                    .push(c.rows.iter().map(|r| r.id).collect());
                if slow {
                    gate.notified().await;
                }
            }
        };
        let ids = || {
            let mut v = started.lock().unwrap().clone();
            v.sort();
            v
        };
        let mut lanes = InFlight::default();
        let rows = vec![
            row(1, "telegram:1"),
            row(2, "telegram:2"),
            row(3, "telegram:1"),
        ];
        lanes.add(Instant::now(), rows, &start);
        assert_eq!(lanes.outstanding(), 3);
        lanes.join_next(&start).await; // the quick lane
        assert_eq!(lanes.outstanding(), 2);
        lanes.add(Instant::now(), vec![row(4, "telegram:1")], &start);
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(ids(), [vec![1, 3], vec![2]], "row 4 waits for its lane");
        gate.notify_one();
        lanes.join_next(&start).await;
        gate.notify_one();
        lanes.join_next(&start).await;
        assert_eq!(ids(), [vec![1, 3], vec![2], vec![4]]);
        assert!(lanes.is_empty());
        assert_eq!(lanes.outstanding(), 0);
    }
}
