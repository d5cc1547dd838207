//! One lane's worker: take the turn lease, drain the lane's inbox in arrival order, one turn at
//! a time, then release the lease when idle.
//!
//! A turn's output (user message, tool traffic, reply, outbox chunks, inbox mark) lands in one
//! lease-checked transaction. A crash before that commit re-runs the turn; a crash after it
//! never sends twice (the outbox remembers). A worker that loses its lease stops at once and
//! writes nothing more.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::router::LaneRouter;
use crate::agent::context::Known;
use crate::domain::LaneKey;
use crate::store::{Lease, Session, StoreError};

pub(super) struct Worker {
    pub(super) router: Arc<LaneRouter>,
    pub(super) lane: LaneKey,
    tx: mpsc::Sender<()>,
    rx: mpsc::Receiver<()>,
    holder: String,
    /// The lane's open session and its live rows as the last turn committed them. Valid only
    /// while this worker holds the lease (a worker takes the lease once), because every write
    /// to a lane's transcript is lease-checked; anything but a committed turn forgets it.
    pub(super) known: std::sync::Mutex<Option<(Session, Known)>>,
    /// A turn took later rows of the batch in (mid-turn messages): read the inbox again.
    pub(super) reread: std::sync::atomic::AtomicBool,
    /// A failed attempt may have left its turn open: the next turn's start closes it.
    pub(super) open_turn: std::sync::atomic::AtomicBool,
}

/// Why a worker stops before its lane is drained.
pub(super) enum Stop {
    LeaseLost,
    Shutdown,
}

impl Worker {
    pub(super) fn new(
        router: Arc<LaneRouter>,
        lane: LaneKey,
        tx: mpsc::Sender<()>,
        rx: mpsc::Receiver<()>,
    ) -> Worker {
        let holder = format!(
            "{}/{}",
            router.deps.replica_id,
            uuid::Uuid::new_v4().simple()
        );
        Worker {
            router,
            lane,
            tx,
            rx,
            holder,
            known: std::sync::Mutex::new(None),
            reread: std::sync::atomic::AtomicBool::new(false),
            open_turn: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(super) async fn run(mut self) {
        let span = tracing::info_span!("lane", lane = %self.lane);
        async move {
            let permit = self.slot().await;
            let mut panicked = false;
            let mut held_elsewhere = false;
            if permit.is_some() {
                let lease = self.acquire().await;
                held_elsewhere = lease.is_none();
                if let Some(lease) = lease {
                    // A panic in a turn unwinds `serve`, whose guard stops the heartbeat; the
                    // lease is then released here so the lane's next worker (the rescan starts
                    // one) takes over at once instead of after the lease's expiry. The event
                    // stays pending with its attempt counted: the poison guard still applies.
                    let served = std::panic::AssertUnwindSafe(self.serve(&lease))
                        .catch_unwind()
                        .await;
                    if served.is_err() {
                        self.after_panic(&lease).await;
                        panicked = true;
                    }
                }
            }
            self.leave();
            // A message that woke this worker while it was going down would otherwise wait for
            // the rescan; once out of the map, later wakes start a new worker themselves.
            if panicked && self.rx.try_recv().is_ok() {
                self.router.dispatch(self.lane.clone());
            }
            // Another replica's worker holds the lane (the wake raced it): wake it there
            // rather than leave the waiting messages to a rescan.
            if held_elsewhere {
                self.router.hand_over(self.lane.clone());
            }
        }
        .instrument(span)
        .await
    }

    /// A worker slot; when none is free, one idle worker is asked to give its slot up.
    async fn slot(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let slots = self.router.slots.clone();
        if let Ok(p) = slots.clone().try_acquire_owned() {
            return Some(p);
        }
        self.router.slot_waiters.fetch_add(1, Ordering::SeqCst);
        self.router.slot_wanted.notify_one();
        let permit = tokio::select! {
            p = slots.acquire_owned() => p.ok(),
            _ = self.router.abort.cancelled() => None,
        };
        self.router.slot_waiters.fetch_sub(1, Ordering::SeqCst);
        permit
    }

    /// A few tries: a lease held elsewhere means another worker (maybe another replica) is on
    /// this lane and will drain it; the rescan catches anything left behind.
    async fn acquire(&self) -> Option<Lease> {
        let deps = &self.router.deps;
        let ttl = Duration::from_secs(deps.config.lanes.lease_ttl_secs);
        for attempt in 0..20u32 {
            // Read before taking, only to tell a takeover from a clean start for the metric: a
            // released lease has `expires_at` 0, one that merely ran out belonged to a worker
            // that died or stalled.
            let prior = deps
                .store
                .lease_get(self.lane.as_str())
                .await
                .ok()
                .flatten();
            let mut taken = deps
                .store
                .lease_acquire(self.lane.as_str(), &self.holder, ttl)
                .await;
            if matches!(taken, Ok(None)) {
                // A worker of a dead replica: no need to wait out its lease's TTL.
                taken = deps
                    .store
                    .lease_take_from_dead(self.lane.as_str(), &self.holder, ttl)
                    .await;
            }
            match taken {
                Ok(Some(lease)) => {
                    match prior.filter(|p| p.expires_at != 0 && p.holder != self.holder) {
                        Some(p) => {
                            metrics::counter!("herald_lease_acquired_total", "kind" => "takeover")
                                .increment(1);
                            tracing::info!(previous = %p.holder, "lease taken over from a worker that did not release it");
                        }
                        None => {
                            metrics::counter!("herald_lease_acquired_total", "kind" => "clean")
                                .increment(1);
                        }
                    }
                    return Some(lease);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "lease acquire failed"),
            }
            if attempt >= 5
                && deps
                    .store
                    .lease_get(self.lane.as_str())
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|l| l.expires_at > crate::store::now_ms() + 1000)
            {
                return None;
            }
            if crate::tasks::sleep_or_cancel(
                Duration::from_millis(100 * (attempt as u64 + 1).min(10)),
                &self.router.abort,
            )
            .await
            .is_err()
            {
                return None;
            }
        }
        None
    }

    async fn serve(&mut self, lease: &Lease) {
        let deps = self.router.deps.clone();
        let lost = CancellationToken::new();
        let heartbeat = crate::tasks::spawn_owned(super::heartbeat::heartbeat(
            deps.clone(),
            lease.clone(),
            lost.clone(),
            self.router.abort.clone(),
        ));
        let idle = Duration::from_secs(deps.config.lanes.idle_secs);
        'outer: loop {
            if self.router.stop_taking.is_cancelled() || lost.is_cancelled() {
                break;
            }
            let rows = match deps.store.inbox_pending(&self.lane, 8).await {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the lane's inbox; retrying");
                    let wait = Duration::from_secs(1);
                    if crate::tasks::sleep_or_cancel(wait, &self.router.stop_taking)
                        .await
                        .is_err()
                    {
                        break;
                    }
                    continue;
                }
            };
            if rows.is_empty() {
                // Drained while other lanes wait for a slot: give this one up now. (Their
                // requests for a slot collapse into one stored notification, so waiting for
                // it alone would leave most of them waiting out `idle_secs`.)
                if self.router.slot_waiters.load(Ordering::SeqCst) > 0 {
                    if self.may_leave() {
                        break;
                    }
                    // `may_leave` took the waiting wake: read the inbox again rather than wait
                    // for a wake that is gone. (A wake sent during a turn whose row that turn's
                    // batch already served is common with streaming, where people write again
                    // as soon as the preview shows the answer; waiting here held the slot
                    // until `idle_secs` while other lanes waited for it.)
                    continue;
                }
                tokio::select! {
                    _ = self.rx.recv() => continue,
                    _ = lost.cancelled() => break,
                    _ = self.router.stop_taking.cancelled() => break,
                    _ = tokio::time::sleep(idle) => {
                        if self.may_leave() { break } else { continue }
                    }
                    _ = self.router.slot_wanted.notified() => {
                        if self.router.slot_waiters.load(Ordering::SeqCst) == 0 {
                            continue;
                        }
                        if self.may_leave() {
                            break;
                        }
                        // A wake arrived meanwhile: this lane has work, pass the request on.
                        self.router.slot_wanted.notify_one();
                        continue;
                    }
                }
            }
            for row in rows {
                if self.router.stop_taking.is_cancelled() {
                    break 'outer;
                }
                match self.process(lease, row, &lost).await {
                    Ok(()) if self.reread.swap(false, Ordering::SeqCst) => continue 'outer,
                    Ok(()) => {}
                    Err(Stop::LeaseLost) => {
                        metrics::counter!("herald_lease_lost_total").increment(1);
                        tracing::warn!("turn lease lost; this worker stops writing");
                        break 'outer;
                    }
                    Err(Stop::Shutdown) => break 'outer,
                }
            }
        }
        drop(heartbeat);
        if !lost.is_cancelled() {
            if let Err(e) = deps.store.lease_release(lease).await {
                tracing::warn!(error = %e, "lease release failed; it will expire");
            }
        }
    }

    async fn after_panic(&self, lease: &Lease) {
        metrics::counter!("herald_turn_panics_total").increment(1);
        tracing::error!(
            "a turn panicked; its event stays pending and the lane's lease is released"
        );
        self.forget();
        self.router
            .running_turns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.lane);
        if let Err(e) = self.router.deps.store.lease_release(lease).await {
            tracing::warn!(error = %e, "lease release after a panic failed; it will expire");
        }
    }

    /// Idle exit: leave the map only if no wake is waiting (checked under the router lock).
    fn may_leave(&mut self) -> bool {
        let mut workers = self.router.workers.lock().expect("router lock");
        if self.rx.try_recv().is_ok() {
            return false;
        }
        if workers
            .get(&self.lane)
            .is_some_and(|tx| tx.same_channel(&self.tx))
        {
            workers.remove(&self.lane);
        }
        metrics::gauge!("herald_lane_workers").set(workers.len() as f64);
        true
    }

    fn leave(&mut self) {
        let mut workers = self.router.workers.lock().expect("router lock");
        if workers
            .get(&self.lane)
            .is_some_and(|tx| tx.same_channel(&self.tx))
        {
            workers.remove(&self.lane);
        }
        metrics::gauge!("herald_lane_workers").set(workers.len() as f64);
    }
}

impl Worker {
    /// Drops what the worker knows of its session: the next turn reads it from the store.
    pub(super) fn forget(&self) {
        self.known.lock().expect("known lock").take();
    }
}

pub(super) enum Failure {
    Stop(Stop),
    Store(StoreError),
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}
