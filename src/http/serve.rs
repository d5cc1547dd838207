//! The listener's accept loop: a cap on open connections, each served under the deadlines of
//! `conn.rs`, every task on the app's tracker, graceful shutdown on its token.
//!
//! One client must not be able to take the daemon down by opening sockets: without a cap,
//! idle connections used every file descriptor and the store, model and platform clients
//! failed with them. So at most `server.max_connections` slots are held (never more than half
//! the open-file limit); at the cap a new connection closes the one that has waited longest
//! (≥ 250 ms) without a request being worked on — idle, still sending its head, or still
//! sending its body — and takes its slot over at once. Accept errors (out of descriptors, out
//! of memory) back off instead of spinning; they never end the loop.
//!
//! Health and readiness have their own budget: `PROBE_SLOTS` slots beyond the cap. When no
//! connection under the cap can be closed, a newcomer takes a probe slot: a probe (`GET
//! /healthz`, `/readyz`) is answered on it, while any other request on it needs a slot under
//! the cap within `PROBE_WAIT` (closing a waiting connection) or is answered 503 with
//! `Retry-After` and closed. When the probe slots are taken too, a newcomer takes the slot of
//! one that has waited there as long. The accept loop never waits while any of this is
//! possible, so under a flood the kernel's backlog stays short and a probe is not queued
//! behind the flood (it was: ~1 s behind 240 re-dialling uploads, when the loop waited for
//! each evicted connection to close). Only when every slot is busy with work, or younger
//! than 250 ms, do newcomers wait in the backlog (which holds no descriptor of ours).

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conn::{self, Deadlines, Watch};
use super::gate::Gate;
use crate::config::Config;

/// How often, at most, the cap and accept-error warnings repeat while the condition lasts.
const WARN_EVERY: Duration = Duration::from_secs(300);

/// At the cap, only a connection that has waited at least this long without a request is
/// closed for a newcomer. A real client's head is in the socket when it is accepted, so even
/// on a loaded host it is read long before this; and a flood cannot make the loop close
/// connections faster than `max_connections` per this interval.
pub(super) const EVICT_MIN_AGE: Duration = Duration::from_millis(250);

/// Connections beyond `server.max_connections` kept for health and readiness probes.
pub const PROBE_SLOTS: usize = 64;

/// The listener's limits, resolved once at start.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    deadlines: Deadlines,
    max_connections: usize,
}

impl Limits {
    /// From `[server]`, with the cap lowered to half the soft open-file limit when it would not
    /// leave the rest of the daemon enough descriptors.
    pub fn from_config(c: &Config) -> Limits {
        let mut max = c.server.max_connections.max(1);
        if let Ok((soft, _)) = rlimit::getrlimit(rlimit::Resource::NOFILE) {
            let room = usize::try_from(soft / 2).unwrap_or(usize::MAX).max(1);
            if max > room {
                tracing::warn!(
                    configured = max,
                    used = room,
                    fd_soft_limit = soft,
                    "server.max_connections is more than half the open-file limit; lowered"
                );
                max = room;
            }
        }
        Limits {
            deadlines: Deadlines {
                header: Duration::from_secs(c.server.header_timeout_secs.max(1)),
                idle: Duration::from_secs(c.server.idle_timeout_secs.max(1)),
                body: Duration::from_secs(c.server.body_timeout_secs.max(1)),
            },
            max_connections: max,
        }
    }
}

/// Raises the soft open-file limit to the hard one, where the platform allows, and logs both.
/// Called once by the daemon at start (not by `App::start`, which tests run in-process).
pub fn raise_fd_limit() {
    let before = rlimit::getrlimit(rlimit::Resource::NOFILE);
    match (before, rlimit::increase_nofile_limit(u64::MAX)) {
        (Ok((soft, hard)), Ok(now)) => {
            tracing::info!(before = soft, now, hard, "open-file limit (soft)");
        }
        (_, Err(e)) => tracing::warn!(error = %e, "could not raise the open-file limit"),
        (Err(e), Ok(now)) => tracing::info!(now, error = %e, "open-file limit (soft)"),
    }
}

/// The open connections the loop may close when it needs a slot.
#[derive(Default)]
pub(super) struct Open {
    next: u64,
    conns: HashMap<u64, Arc<Gate>>,
}

impl Open {
    fn add(&mut self, g: Arc<Gate>) -> u64 {
        self.next += 1;
        self.conns.insert(self.next, g);
        self.next
    }

    /// Asks the connection that has waited longest without a request being worked on, and
    /// since at most `before` (ms of the listener's clock), to close, and takes its slot over
    /// at once (its socket closes within moments, holding no slot). `probe`: among the
    /// connections on probe slots, else among the others. `None` when there is none.
    pub(super) fn evict_one(&self, before: u64, probe: bool) -> Option<Held> {
        let (_, victim) = self
            .conns
            .values()
            .filter(|g| !g.watch.evicted() && g.watch.on_probe_slot() == probe)
            .filter_map(|g| g.watch.waiting_since().map(|t| (t, g)))
            .filter(|(t, _)| *t <= before)
            .min_by_key(|(t, _)| *t)?;
        victim.watch.evict();
        victim.held.lock().expect("slot").take()
    }
}

/// Accepts on `listener` until `shutdown`, serving `router`; every task goes on `tracker`.
pub fn start(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    tracker: &TaskTracker,
    shutdown: CancellationToken,
) {
    let task_tracker = tracker.clone();
    tracker.spawn(accept_loop(
        listener,
        router,
        limits,
        task_tracker,
        shutdown,
    ));
}

/// The listener's two pools of slots.
#[derive(Clone)]
pub(super) struct Slots {
    pub(super) main: Arc<Semaphore>,
    probe: Arc<Semaphore>,
    /// Requests on probe slots waiting for a slot under the cap: while there are any, a
    /// closing connection's slot under the cap goes to them, not to a newcomer.
    pub(super) waiting: Arc<AtomicUsize>,
}

impl Slots {
    fn try_main(&self) -> Option<Held> {
        let p = self.main.clone().try_acquire_owned().ok()?;
        Some(Held::new(p, false))
    }

    fn try_probe(&self) -> Option<Held> {
        let p = self.probe.clone().try_acquire_owned().ok()?;
        Some(Held::new(p, true))
    }
}

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let epoch = Instant::now();
    let slots = Slots {
        main: Arc::new(Semaphore::new(limits.max_connections)),
        probe: Arc::new(Semaphore::new(PROBE_SLOTS)),
        waiting: Arc::new(AtomicUsize::new(0)),
    };
    let open = Arc::new(Mutex::new(Open::default()));
    let mut cap_warned: Option<(Instant, u64)> = None;
    let mut error_warned: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.cancelled() => return,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) if is_per_connection(&e) => continue,
            Err(e) => {
                // EMFILE, ENFILE, ENOBUFS, ENOMEM: the next accept would fail the same way.
                // Free a slot if one is idle and pause; the backlog keeps the clients.
                metrics::counter!("herald_http_accept_errors_total").increment(1);
                if error_warned.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                    tracing::warn!(error = %e, "HTTP accept failed; backing off");
                    error_warned = Some(Instant::now());
                }
                drop(
                    open.lock()
                        .expect("open connections")
                        .evict_one(u64::MAX, false),
                );
                let pause = Duration::from_millis(100);
                if crate::tasks::sleep_or_cancel(pause, &shutdown)
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
        };
        let held = match slots.try_main() {
            Some(h) => h,
            None => {
                note_cap(&mut cap_warned, limits.max_connections);
                match at_cap(&slots, &open, epoch) {
                    Some(h) => h,
                    None => match wait_for_slot(&slots, &open, epoch, &shutdown).await {
                        Some(h) => h,
                        None => return,
                    },
                }
            }
        };
        let watch = Watch::new(epoch);
        if held.probe {
            watch.set_probe_slot(true);
            metrics::counter!("herald_http_probe_slot_connections_total").increment(1);
        }
        let gate = Arc::new(Gate {
            held: Mutex::new(Some(held)),
            slots: slots.clone(),
            open: open.clone(),
            watch: watch.clone(),
            epoch,
        });
        let id = open.lock().expect("open connections").add(gate.clone());
        let (open, router) = (open.clone(), router.clone());
        let conn_shutdown = shutdown.clone();
        tracker.spawn(async move {
            conn::serve(
                stream,
                peer,
                router,
                watch,
                gate,
                limits.deadlines,
                conn_shutdown,
            )
            .await;
            // Drops the last reference to the gate (and its slot, if still held).
            open.lock().expect("open connections").conns.remove(&id);
        });
    }
}

/// At the cap, without waiting (the accept loop must keep taking probes): the slot of the
/// connection that has waited longest under the cap (≥ `EVICT_MIN_AGE`; not while a request
/// on a probe slot waits for one), else a free probe slot, else the probe slot of a
/// connection waiting there. `None` when all are busy.
fn at_cap(slots: &Slots, open: &Mutex<Open>, epoch: Instant) -> Option<Held> {
    let before = evictable_before(epoch);
    if let Some(h) = open
        .lock()
        .expect("open connections")
        .evict_one(before, false)
    {
        return Some(h);
    }
    if let Some(h) = slots.try_probe() {
        return Some(h);
    }
    open.lock()
        .expect("open connections")
        .evict_one(before, true)
}

/// The listener's clock (ms) before which a waiting connection may be closed for a newcomer.
pub(super) fn evictable_before(epoch: Instant) -> u64 {
    (epoch.elapsed().saturating_sub(EVICT_MIN_AGE)).as_millis() as u64
}

/// A slot for the connection just accepted when every slot is busy: tries [`at_cap`] again
/// every `EVICT_MIN_AGE`, and takes any slot a connection frees. `None` on shutdown.
async fn wait_for_slot(
    slots: &Slots,
    open: &Mutex<Open>,
    epoch: Instant,
    shutdown: &CancellationToken,
) -> Option<Held> {
    loop {
        if let Some(h) = at_cap(slots, open, epoch) {
            return Some(h);
        }
        tokio::select! {
            p = slots.main.clone().acquire_owned() => return p.ok().map(|p| Held::new(p, false)),
            p = slots.probe.clone().acquire_owned() => return p.ok().map(|p| Held::new(p, true)),
            _ = tokio::time::sleep(EVICT_MIN_AGE) => {}
            _ = shutdown.cancelled() => return None,
        }
    }
}

/// A slot under the cap or a probe slot; `herald_http_connections` counts those held.
pub(super) struct Held {
    pub(super) probe: bool,
    _permit: OwnedSemaphorePermit,
}

impl Held {
    pub(super) fn new(permit: OwnedSemaphorePermit, probe: bool) -> Held {
        metrics::gauge!("herald_http_connections").increment(1.0);
        Held {
            probe,
            _permit: permit,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        metrics::gauge!("herald_http_connections").decrement(1.0);
    }
}

/// One warning when the cap is reached, then at most one every `WARN_EVERY` with the count
/// in between; the counter has every occurrence.
fn note_cap(warned: &mut Option<(Instant, u64)>, max: usize) {
    metrics::counter!("herald_http_connections_at_cap_total").increment(1);
    match warned {
        Some((at, since)) if at.elapsed() < WARN_EVERY => *since += 1,
        _ => {
            let since = warned.map_or(0, |(_, n)| n);
            tracing::warn!(
                max_connections = max,
                at_cap_since_last_warning = since,
                "HTTP connection cap reached: new connections close the longest-idle one or \
                 wait for a free slot (server.max_connections)"
            );
            *warned = Some((Instant::now(), 0));
        }
    }
}

/// Errors that concern only the connection being accepted: try the next one at once.
fn is_per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock
    )
}
