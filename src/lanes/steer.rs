//! The lane's side of mid-turn messages (`lanes.mid_turn`): which of the lane's pending inbox
//! rows may join the running turn, and when a new one should interrupt it.
//!
//! A row joins only if it is the next pending row after the turn's own rows (arrival order is
//! kept), a typed text message with no files, no command or control word (`/stop`, `/status`,
//! `/wrapup`, the `handoff` word stay on their own), and passes the pre-dispatch chain (a row
//! that chain would skip is never merged). A group member's message joins only in `steer`,
//! and says who wrote it. A row that joined stays pending until the turn's one commit marks
//! it with the turn's own row, so a crash loses nothing: the retried turn takes it again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::sync::Notify;

use super::preview::LiveTurn;
use super::worker::Worker;
use crate::agent::steer::Steer;
use crate::config::MidTurn;
use crate::domain::{MessageEvent, MessageKind, Role};
use crate::hooks::Dispatch;
use crate::store::{InboxRow, NewMessage};

/// Pending rows read at once when looking for corrections.
const LOOK_AHEAD: i64 = 16;

/// One running turn's source of corrections.
pub(super) struct LaneSteer<'a> {
    worker: &'a Worker,
    row: &'a InboxRow,
    mode: MidTurn,
    wake: Arc<Notify>,
    live: Option<&'a LiveTurn>,
    state: Mutex<State>,
    /// Set once another person's words joined: the turn's gate then asks before any call that
    /// is not read-only (see [`super::activity::ActivityGate`]).
    foreign: &'a AtomicBool,
}

#[derive(Default)]
struct State {
    /// Rows taken so far, in order, with the user row each became.
    taken: Vec<(i64, NewMessage)>,
    /// How many of `taken` the current attempt of the agent loop has been handed.
    offered: usize,
    /// The agent loop asked at least once (interrupt mode merges only before its first call).
    asked: bool,
    /// Rows were already queued when this turn first asked: they wait for their own turns, and
    /// nothing later may join ahead of them.
    queued: bool,
}

impl<'a> LaneSteer<'a> {
    /// `None` in `queue` mode and for scheduled runs.
    pub(super) fn new(
        worker: &'a Worker,
        row: &'a InboxRow,
        live: Option<&'a LiveTurn>,
        foreign: &'a AtomicBool,
    ) -> Option<LaneSteer<'a>> {
        let mode = worker.router.deps.config.lanes.mid_turn;
        if mode == MidTurn::Queue
            || !row
                .event
                .is_person(&[MessageKind::Text, MessageKind::Media])
        {
            return None;
        }
        let wake = Arc::new(Notify::new());
        worker
            .router
            .steering
            .lock()
            .expect("steering lock")
            .insert(worker.lane.clone(), wake.clone());
        Some(LaneSteer {
            worker,
            row,
            mode,
            wake,
            live,
            state: Mutex::new(State::default()),
            foreign,
        })
    }

    /// The next attempt of the agent loop starts from the history: it is handed every row
    /// taken so far again.
    pub(super) fn rewind(&self) {
        self.state.lock().expect("steer lock").offered = 0;
    }

    /// The rows this turn took, with their user rows, in order.
    pub(super) fn taken(&self) -> Vec<(i64, NewMessage)> {
        self.state.lock().expect("steer lock").taken.clone()
    }

    /// Resolves when a message from the same person arrives that should stop this turn
    /// (`interrupt` mode); never otherwise.
    pub(super) async fn interrupt(&self) {
        if self.mode != MidTurn::Interrupt {
            return std::future::pending().await;
        }
        loop {
            self.wake.notified().await;
            if let Some(next) = self.pending().await.into_iter().next() {
                if self.joins(&next).await.is_some() {
                    metrics::counter!("herald_turn_interrupts_total").increment(1);
                    return;
                }
            }
        }
    }

    /// The lane's pending rows after this turn's own, in order.
    async fn pending(&self) -> Vec<InboxRow> {
        let after = {
            let s = self.state.lock().expect("steer lock");
            if s.queued {
                return Vec::new();
            }
            s.taken.last().map_or(self.row.id, |(id, _)| *id)
        };
        let store = &self.worker.router.deps.store;
        match store.inbox_pending(&self.worker.lane, LOOK_AHEAD).await {
            Ok(rows) => rows.into_iter().filter(|r| r.id > after).collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the lane's inbox for corrections");
                Vec::new()
            }
        }
    }

    /// The user row `row` becomes when it joins this turn; `None`: it waits for its own turn.
    async fn joins(&self, row: &InboxRow) -> Option<NewMessage> {
        let ev = &row.event;
        let own = &self.row.event;
        let mine = ev.sender_id == own.sender_id && ev.platform == own.platform;
        if !mergeable(ev) || (!mine && self.mode != MidTurn::Steer) {
            return None;
        }
        let deps = &self.worker.router.deps;
        if deps.pre_dispatch.claims(ev) {
            return None;
        }
        let Dispatch::Turn(ev) = deps.pre_dispatch.run(ev).await else {
            return None;
        };
        let content = if mine {
            ev.text.clone()
        } else {
            self.foreign.store(true, Ordering::SeqCst);
            format!("{} wrote: {}", display_name(&ev), ev.text)
        };
        let mut user = NewMessage::new(Role::User, content);
        user.platform_message_id = Some(ev.platform_message_id.clone());
        Some(user)
    }
}

/// A typed text message with no files that is no command.
fn mergeable(ev: &MessageEvent) -> bool {
    ev.is_person(&[MessageKind::Text])
        && ev.attachments.is_empty()
        && !ev.text.trim().is_empty()
        && !ev.text.trim_start().starts_with('/')
}

fn display_name(ev: &MessageEvent) -> String {
    let name = ev.sender_name.trim();
    if name.is_empty() {
        ev.sender_id.clone()
    } else {
        name.to_string()
    }
}

#[async_trait]
impl Steer for LaneSteer<'_> {
    async fn arrived(&self) {
        if self.mode != MidTurn::Steer {
            return std::future::pending().await;
        }
        self.wake.notified().await;
    }

    async fn take(&self) -> Vec<NewMessage> {
        let (again, asked) = {
            let s = self.state.lock().expect("steer lock");
            (s.taken[s.offered..].to_vec(), s.asked)
        };
        // `interrupt` merges what is pending when the turn starts, nothing later.
        let look = self.mode == MidTurn::Steer || !asked;
        let mut new = Vec::new();
        // A first start in `steer` mode takes what arrives while it runs, not what was queued
        // before it (a retried turn takes both: it cannot tell them apart, and a correction
        // its first run took in must not be answered twice).
        let queued_check = self.mode == MidTurn::Steer && !asked && self.row.attempts == 0;
        let pending = if look {
            self.pending().await
        } else {
            Vec::new()
        };
        if queued_check && !pending.is_empty() {
            self.state.lock().expect("steer lock").queued = true;
            return again.into_iter().map(|(_, m)| m).collect();
        }
        if look {
            for row in pending {
                match self.joins(&row).await {
                    Some(user) => new.push((row.id, user)),
                    None => break,
                }
            }
        }
        // No await below: a take dropped before here has taken nothing.
        let mut s = self.state.lock().expect("steer lock");
        s.asked = true;
        if !new.is_empty() {
            if let Some(live) = self.live {
                live.corrected();
            }
            metrics::counter!("herald_turn_corrections_total").increment(new.len() as u64);
            tracing::info!(rows = ?new.iter().map(|(id, _)| id).collect::<Vec<_>>(), "messages join the running turn");
        }
        let fresh = new.iter().map(|(_, m)| m.clone());
        let out: Vec<NewMessage> = again.into_iter().map(|(_, m)| m).chain(fresh).collect();
        s.taken.extend(new);
        s.offered = s.taken.len();
        out
    }
}

impl Drop for LaneSteer<'_> {
    fn drop(&mut self) {
        let mut map = self.worker.router.steering.lock().expect("steering lock");
        if map
            .get(&self.worker.lane)
            .is_some_and(|w| Arc::ptr_eq(w, &self.wake))
        {
            map.remove(&self.worker.lane);
        }
    }
}
