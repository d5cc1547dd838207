//! The router's side of the replica signals (`store::Signal`): where a woken lane runs, the
//! slots beat, and what other replicas' signals do here.
//!
//! A wake for a lane this replica already works on stays here. Otherwise, when other replicas
//! are alive, the lane's lease decides: a lane held by a live replica is woken there (its worker
//! may be idle, holding the lease, and would otherwise wait for its rescan), a free one goes to
//! the replica [`Placement`] chooses. A `/stop` reaches the turn wherever it runs, and a finished
//! event reaches the web request or cron fire waiting for it on any replica.

use std::sync::Arc;
use std::time::Duration;

use super::ingest::OwnStop;
use super::router::LaneRouter;
use crate::domain::LaneKey;
use crate::store::{Signal, SignalRx};

const SLOTS_EVERY: Duration = crate::store::ROLE_RENEW_EVERY;

/// Where a lane's wake goes.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    Here,
    There(String),
}

impl LaneRouter {
    /// Routes a wake: here, or to the replica that holds or should take the lane.
    pub(super) fn wake_lane(self: &Arc<Self>, lane: LaneKey) {
        if self.has_worker(&lane) || !self.others() {
            self.dispatch(lane);
            return;
        }
        let router = self.clone();
        self.tasks.spawn(async move {
            match router.target(&lane).await {
                Target::Here => router.dispatch(lane),
                Target::There(to) => router.tell(Signal::Wake { to, lane }).await,
            }
        });
    }

    /// A worker here could not take the lane's lease: with other replicas alive, the wake goes
    /// where the lane is held (or placement sends it). Alone, the rescan covers it.
    pub(super) fn hand_over(self: &Arc<Self>, lane: LaneKey) {
        if self.others() && !self.stop_taking.is_cancelled() {
            self.wake_lane(lane);
        }
    }

    /// `/stop`: the turn here, and wherever else it runs.
    pub(super) fn stop_everywhere(self: &Arc<Self>, lane: LaneKey, only: Option<OwnStop>) {
        self.cancel_turn(&lane, only.as_ref());
        if self.others() {
            let router = self.clone();
            let (only, inbox) = only.map_or((None, None), |o| (Some(o.sender), o.inbox));
            self.tasks
                .spawn(async move { router.tell(Signal::Stop { lane, only, inbox }).await });
        }
    }

    /// An inbox event's processing ended here: tell local waiters, and the other replicas'.
    pub(super) async fn finish(&self, inbox: i64) {
        let _ = self.deps.finished.send(inbox);
        if self.others() {
            let from = self.placement.me().to_string();
            self.tell(Signal::Done { from, inbox }).await;
        }
    }

    /// Listens to the other replicas and beats this one's free slots, while the router takes
    /// events. Nothing to do on a store no other process shares.
    pub async fn start_signals(self: &Arc<Self>) {
        if !self.shared() {
            return;
        }
        let stop = self.stop_taking.clone();
        match self.deps.store.listen(&self.tasks, stop).await {
            Ok(Some(rx)) => {
                self.tasks.spawn(self.clone().hear(rx));
                self.tasks.spawn(self.clone().beat_slots());
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e,
                "cannot listen to the other replicas; lanes are found by the rescan only"),
        }
    }

    async fn hear(self: Arc<Self>, mut rx: SignalRx) {
        while let Some(signal) = rx.recv().await {
            match signal {
                Signal::Wake { to, lane } if to == self.placement.me() => self.dispatch(lane),
                Signal::Wake { .. } => {}
                Signal::Stop { lane, only, inbox } => {
                    let own = only.map(|sender| OwnStop { sender, inbox });
                    self.cancel_turn(&lane, own.as_ref());
                }
                Signal::Done { from, inbox } if from != self.placement.me() => {
                    let _ = self.deps.finished.send(inbox);
                }
                Signal::Done { .. } => {}
                Signal::Slots { from, free } => {
                    self.placement.heard(&from, free);
                    metrics::gauge!("herald_replica_peers").set(self.placement.peers() as f64);
                }
                Signal::Missed => {
                    tracing::info!("replica signals may have been missed; rescanning the inbox");
                    self.tasks.spawn(self.clone().rescan_once());
                }
            }
        }
    }

    /// This replica's free slots, every second, and 0 once it stops taking events. A peer that
    /// fell silent may have died holding lanes: the inbox is rescanned then, so its lanes'
    /// messages move on as soon as its liveness lease runs out, not at the next rescan.
    async fn beat_slots(self: Arc<Self>) {
        loop {
            if self.placement.forget_silent() {
                metrics::gauge!("herald_replica_peers").set(self.placement.peers() as f64);
                tracing::info!("a replica fell silent; rescanning the inbox for its lanes");
                self.tasks.spawn(self.clone().rescan_once());
            }
            let free = self.free_slots();
            self.tell(Signal::Slots {
                from: self.placement.me().to_string(),
                free,
            })
            .await;
            if crate::tasks::sleep_or_cancel(SLOTS_EVERY, &self.stop_taking)
                .await
                .is_err()
            {
                break;
            }
        }
        let from = self.placement.me().to_string();
        self.tell(Signal::Slots { from, free: 0 }).await;
    }

    /// Slots for lanes that would run a turn now: the workers' limit less the running turns
    /// (an idle worker gives its slot up when a lane waits for one).
    pub(super) fn free_slots(&self) -> u32 {
        let running = self.running_turns.lock().expect("turns lock").len();
        self.deps.config.lanes.max_workers.saturating_sub(running) as u32
    }

    /// Here, the live replica whose worker holds the lane's lease, or the one placement chooses.
    async fn target(&self, lane: &LaneKey) -> Target {
        let me = self.placement.me();
        let now = crate::store::now_ms();
        match self.deps.store.lease_get(lane.as_str()).await {
            Ok(Some(l)) if l.expires_at > now => {
                let replica = l.replica();
                if replica == me {
                    return Target::Here;
                }
                if self.placement.is_live(replica) {
                    return Target::There(replica.to_string());
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the lane's lease; taking the lane here");
                return Target::Here;
            }
        }
        let chosen = self.placement.choose(lane, self.free_slots());
        if chosen == me {
            Target::Here
        } else {
            Target::There(chosen)
        }
    }

    async fn tell(&self, signal: Signal) {
        if let Err(e) = self.deps.store.signal(&signal).await {
            tracing::debug!(error = %e, ?signal, "a replica signal was not sent; the rescan covers it");
        }
    }

    fn shared(&self) -> bool {
        self.deps.store.signals_shared()
    }

    /// Whether other live replicas share the store (and hear signals).
    fn others(&self) -> bool {
        self.shared() && self.placement.has_peers()
    }

    fn has_worker(&self, lane: &LaneKey) -> bool {
        self.workers.lock().expect("router lock").contains_key(lane)
    }
}
