//! The lane router: lane → worker, spawning on demand and reaping idle workers.
//!
//! Invariant: at most one worker per lane in this process (the map, under one lock), and at
//! most one across replicas (the turn lease). A wake sent under the lock is either seen by the
//! live worker or causes a new one: a worker leaves the map only after checking, under the
//! same lock, that no wake is waiting.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ingest::{OwnStop, Wake, Wakes};
use super::worker::Worker;
use super::Deps;
use crate::domain::LaneKey;

/// A turn running in this process: its `/stop` and the sender whose message it answers.
pub(super) struct RunningTurn {
    pub(super) stop: CancellationToken,
    pub(super) sender: String,
}

pub struct LaneRouter {
    pub(super) deps: Arc<Deps>,
    pub(super) workers: Mutex<HashMap<LaneKey, mpsc::Sender<()>>>,
    pub(super) running_turns: Mutex<HashMap<LaneKey, RunningTurn>>,
    /// What each running turn of this process is doing (for `/status`), beside `running_turns`.
    pub(super) activity: Mutex<HashMap<LaneKey, Arc<super::activity::Activity>>>,
    /// The wake of each running turn that listens for mid-turn messages (`lanes.mid_turn`).
    pub(super) steering: Mutex<HashMap<LaneKey, Arc<Notify>>>,
    /// Lanes whose turn ended because of `/stop`: the command's answer says so, once.
    pub(super) stopped: Mutex<std::collections::HashSet<LaneKey>>,
    /// A group member's `/stop` that found another member's turn running, by lane and sender:
    /// the command's answer is the refusal, once.
    pub(super) refused_stops: Mutex<std::collections::HashSet<(LaneKey, String)>>,
    /// Short tasks beside the workers (`/status` answers), drained with the app.
    pub(super) tasks: TaskTracker,
    pub(super) slots: Arc<Semaphore>,
    /// Lanes waiting for a slot, and the signal that asks one idle worker to give its slot up:
    /// an idle worker would otherwise keep its slot for `lanes.idle_secs` while other lanes
    /// have messages waiting.
    pub(super) slot_waiters: AtomicUsize,
    pub(super) slot_wanted: Notify,
    /// The lane workers, and only them: shutdown waits on this tracker for them to finish.
    workers_tracker: TaskTracker,
    /// Stop taking new events (graceful shutdown, phase one).
    pub(super) stop_taking: CancellationToken,
    /// Abort in-flight turns (graceful shutdown, phase two).
    pub(super) abort: CancellationToken,
    /// Live text of streamed turns, for the web chat's server-sent events.
    pub(super) hub: super::StreamHub,
    /// Which replica takes up a lane nobody runs (`signals.rs`).
    pub(super) placement: super::placement::Placement,
}

impl LaneRouter {
    /// The router, draining `wakes` (from every [`super::Ingest`]) on `tracker` until it
    /// stops taking events. Its two shutdown phases are children of the app's `root` token:
    /// cancelling the root stops and aborts everything here too.
    pub fn new(
        deps: Arc<Deps>,
        tracker: &TaskTracker,
        wakes: Wakes,
        root: &CancellationToken,
    ) -> Arc<LaneRouter> {
        let slots = Arc::new(Semaphore::new(deps.config.lanes.max_workers));
        let router = Arc::new(LaneRouter {
            placement: super::placement::Placement::new(&deps.replica_id),
            deps,
            workers: Mutex::new(HashMap::new()),
            running_turns: Mutex::new(HashMap::new()),
            activity: Mutex::new(HashMap::new()),
            steering: Mutex::new(HashMap::new()),
            stopped: Mutex::new(Default::default()),
            refused_stops: Mutex::new(Default::default()),
            tasks: tracker.clone(),
            slots,
            slot_waiters: AtomicUsize::new(0),
            slot_wanted: Notify::new(),
            workers_tracker: TaskTracker::new(),
            stop_taking: root.child_token(),
            abort: root.child_token(),
            hub: super::StreamHub::default(),
        });
        tracker.spawn(router.clone().drain(wakes));
        router
    }

    /// Carries the wakes of every `Ingest` to the workers.
    async fn drain(self: Arc<Self>, mut wakes: Wakes) {
        loop {
            let wake = tokio::select! {
                w = wakes.0.recv() => w,
                _ = self.stop_taking.cancelled() => return,
            };
            match wake {
                Some(Wake::Lane(lane)) => self.wake_lane(lane),
                Some(Wake::StopTurn(lane, only)) => self.stop_everywhere(lane, only),
                Some(Wake::Status(lane, inbox_id)) => {
                    self.tasks.spawn(self.clone().answer_status(lane, inbox_id));
                }
                None => return,
            }
        }
    }

    /// A read-only view for the admin page and the metrics.
    pub fn view(self: &Arc<Self>) -> LaneView {
        LaneView(self.clone())
    }

    /// Makes sure a worker will look at the lane's inbox soon.
    pub fn dispatch(self: &Arc<Self>, lane: LaneKey) {
        if self.stop_taking.is_cancelled() {
            return;
        }
        if let Some(turn) = self.steering.lock().expect("steering lock").get(&lane) {
            turn.notify_one();
        }
        let mut workers = self.workers.lock().expect("router lock");
        if let Some(tx) = workers.get(&lane) {
            // Full means a wake is already waiting: enough.
            if !matches!(tx.try_send(()), Err(mpsc::error::TrySendError::Closed(_))) {
                return;
            }
        }
        let (tx, rx) = mpsc::channel(1);
        workers.insert(lane.clone(), tx.clone());
        metrics::gauge!("herald_lane_workers").set(workers.len() as f64);
        let worker = Worker::new(self.clone(), lane, tx, rx);
        self.workers_tracker.spawn(worker.run());
    }

    /// Cancels the lane's running turn in this process (`/stop`); with `only`, only a turn
    /// answering that sender: another's is left running, and the refusal answers their
    /// command at once (or, failing that, when the worker reaches it). Returns whether a turn
    /// was cancelled.
    pub(super) fn cancel_turn(self: &Arc<Self>, lane: &LaneKey, only: Option<&OwnStop>) -> bool {
        let turns = self.running_turns.lock().expect("turns lock");
        match (turns.get(lane), only) {
            (Some(t), None) => {
                t.stop.cancel();
                true
            }
            (Some(t), Some(own)) if own.sender == t.sender => {
                t.stop.cancel();
                true
            }
            (Some(_), Some(own)) => {
                tracing::info!(lane = %lane, "a group member's /stop of another member's turn was refused");
                self.refused_stops
                    .lock()
                    .expect("refused lock")
                    .insert((lane.clone(), own.sender.clone()));
                if let Some(inbox) = own.inbox {
                    let (router, lane, sender) = (self.clone(), lane.clone(), own.sender.clone());
                    self.tasks
                        .spawn(router.answer_refused_stop(lane, sender, inbox));
                }
                false
            }
            (None, _) => false,
        }
    }

    pub fn active_workers(&self) -> usize {
        self.workers.lock().expect("router lock").len()
    }

    pub fn busy_lanes(&self) -> Vec<LaneKey> {
        self.running_turns
            .lock()
            .expect("turns lock")
            .keys()
            .cloned()
            .collect()
    }

    /// Periodically picks up pending work nobody is working on: leftovers of a crash, events
    /// another replica wrote, wakes lost to a full system or a dead replica.
    pub async fn rescan(self: Arc<Self>, every: Duration) {
        loop {
            self.clone().rescan_once().await;
            if crate::tasks::sleep_or_cancel(every, &self.stop_taking)
                .await
                .is_err()
            {
                return;
            }
        }
    }

    pub(super) async fn rescan_once(self: Arc<Self>) {
        match self.deps.store.inbox_pending_lanes(1000).await {
            Ok(lanes) => {
                for lane in lanes {
                    self.wake_lane(lane);
                }
            }
            Err(e) => tracing::warn!(error = %e, "inbox rescan failed"),
        }
    }

    /// Graceful shutdown: stop taking events, let running turns finish within `grace`, then
    /// abort the rest (their events stay pending for the next start or another replica).
    pub async fn shutdown(&self, grace: Duration) {
        self.stop_taking.cancel();
        // Wake idle workers so they exit now rather than at their idle timeout.
        for tx in self.workers.lock().expect("router lock").values() {
            let _ = tx.try_send(());
        }
        // No worker starts after `stop_taking`, so closing the tracker here is final.
        self.workers_tracker.close();
        if tokio::time::timeout(grace, self.workers_tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                workers = self.active_workers(),
                "grace period over; aborting running turns"
            );
            self.abort.cancel();
            self.workers_tracker.wait().await;
        }
    }
}

/// What the admin page and the metrics may see of the router: which lanes are busy here.
#[derive(Clone)]
pub struct LaneView(Arc<LaneRouter>);

impl LaneView {
    /// Live text of this process's streamed turns, tagged by inbox id.
    pub fn stream_hub(&self) -> super::StreamHub {
        self.0.hub.clone()
    }

    pub fn busy_lanes(&self) -> Vec<LaneKey> {
        self.0.busy_lanes()
    }

    /// Cancelled when the daemon starts shutting down: long-lived readers (the web chat's
    /// event streams) end then, rather than holding the HTTP server's graceful shutdown.
    pub fn stopping(&self) -> CancellationToken {
        self.0.stop_taking.clone()
    }
}
