//! The listener's accept loop: a cap on open connections, each served under the deadlines of
//! `conn.rs`, every task on the app's tracker, graceful shutdown on its token.
//!
//! One client must not be able to take the daemon down by opening sockets: without a cap,
//! idle connections used every file descriptor and the store, model and platform clients
//! failed with them. So at most `server.max_connections` are open (never more than half the
//! open-file limit); at the cap a new connection closes the one that has waited longest
//! (≥ 250 ms) without a request being worked on — idle, still sending its head, or still
//! sending its body — and takes its slot. Accept errors (out of descriptors, out of memory)
//! back off instead of spinning; they never end the loop.
//!
//! Health and readiness have their own budget: `PROBE_SLOTS` connections beyond the cap. When
//! no slot under the cap frees at once, a newcomer takes a probe slot: a probe (`GET
//! /healthz`, `/readyz`) is answered on it, while any other request on it needs a slot under
//! the cap (a waiting connection is asked to make room) or is answered 503 with `Retry-After`
//! and closed. Only when the probe slots are taken too do newcomers wait in the kernel's
//! backlog (which holds no descriptor of ours). So a flood that fills the cap delays neither
//! accepting nor the probes, and the descriptors stay bounded (cap + probe slots).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{header, request, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::conn::{self, Deadlines, Watch};
use crate::config::Config;

/// How often, at most, the cap and accept-error warnings repeat while the condition lasts.
const WARN_EVERY: Duration = Duration::from_secs(300);

/// At the cap, only a connection that has waited at least this long without a request is
/// closed for a newcomer. A real client's head is in the socket when it is accepted, so even
/// on a loaded host it is read long before this; and a flood cannot make the loop close
/// connections faster than `max_connections` per this interval.
const EVICT_MIN_AGE: Duration = Duration::from_millis(250);

/// Connections beyond `server.max_connections` kept for health and readiness probes.
pub const PROBE_SLOTS: usize = 16;

/// How long a newcomer at the cap waits for the slot of a connection just asked to close (it
/// is gone within a millisecond or two) before it takes a probe slot instead.
const EVICT_WAIT: Duration = Duration::from_millis(20);

/// How long a request other than a probe, on a probe slot, may wait for a slot under the cap
/// (asking a waiting connection to close every `EVICT_MIN_AGE`) before it is answered 503.
const PROBE_WAIT: Duration = Duration::from_secs(1);

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
struct Open {
    next: u64,
    conns: HashMap<u64, Arc<Watch>>,
}

impl Open {
    fn add(&mut self, w: Arc<Watch>) -> u64 {
        self.next += 1;
        self.conns.insert(self.next, w);
        self.next
    }

    /// Asks the connection that has waited longest without a request being worked on, and
    /// since at most `before` (ms of the listener's clock), to close; false when there is
    /// none. `probe`: among the connections on probe slots, else among the others.
    fn evict_one(&self, before: u64, probe: bool) -> bool {
        let victim = self
            .conns
            .values()
            .filter(|w| !w.evicted() && w.on_probe_slot() == probe)
            .filter_map(|w| w.waiting_since().map(|t| (t, w)))
            .filter(|(t, _)| *t <= before)
            .min_by_key(|(t, _)| *t);
        match victim {
            Some((_, w)) => {
                w.evict();
                true
            }
            None => false,
        }
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

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    tracker: TaskTracker,
    shutdown: CancellationToken,
) {
    let epoch = Instant::now();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let probe_slots = Arc::new(Semaphore::new(PROBE_SLOTS));
    let open = Arc::new(Mutex::new(Open::default()));
    let mut cap_warned: Option<(Instant, u64)> = None;
    let mut error_warned: Option<Instant> = None;
    let gauge = metrics::gauge!("herald_http_connections");
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
                open.lock()
                    .expect("open connections")
                    .evict_one(u64::MAX, false);
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
        let held = match slots.clone().try_acquire_owned() {
            Ok(p) => Held::Main { _slot: p },
            Err(_) => {
                note_cap(&mut cap_warned, limits.max_connections);
                match at_cap(&slots, &probe_slots, &open, epoch).await {
                    Some(h) => h,
                    None => {
                        match wait_for_slot(&slots, &probe_slots, &open, epoch, &shutdown).await {
                            Some(h) => h,
                            None => return,
                        }
                    }
                }
            }
        };
        let watch = Watch::new(epoch);
        if matches!(held, Held::Probe { .. }) {
            watch.set_probe_slot(true);
            metrics::counter!("herald_http_probe_slot_connections_total").increment(1);
        }
        let id = open.lock().expect("open connections").add(watch.clone());
        let gate = Arc::new(Gate {
            held: Mutex::new(held),
            slots: slots.clone(),
            open: open.clone(),
            watch: watch.clone(),
            epoch,
        });
        let (open, router, gauge) = (open.clone(), router.clone(), gauge.clone());
        let conn_shutdown = shutdown.clone();
        gauge.increment(1.0);
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
            open.lock().expect("open connections").conns.remove(&id);
            gauge.decrement(1.0);
        });
    }
}

/// At the cap: the slot of the connection the longest-waiting one leaves (it closes within
/// moments of being asked), else a probe slot, else `None`. Never waits long: the accept loop
/// must keep taking probes.
async fn at_cap(
    slots: &Arc<Semaphore>,
    probe_slots: &Arc<Semaphore>,
    open: &Mutex<Open>,
    epoch: Instant,
) -> Option<Held> {
    if open
        .lock()
        .expect("open connections")
        .evict_one(evictable_before(epoch), false)
    {
        if let Ok(Ok(p)) = tokio::time::timeout(EVICT_WAIT, slots.clone().acquire_owned()).await {
            return Some(Held::Main { _slot: p });
        }
    }
    probe_slots
        .clone()
        .try_acquire_owned()
        .ok()
        .map(|p| Held::Probe { _slot: p })
}

/// The listener's clock (ms) before which a waiting connection may be closed for a newcomer.
fn evictable_before(epoch: Instant) -> u64 {
    (epoch.elapsed().saturating_sub(EVICT_MIN_AGE)).as_millis() as u64
}

/// A slot for the connection just accepted when the cap and the probe slots are all taken:
/// closes the longest-waiting connection of each kind once it is old enough, else waits for
/// any connection to end. `None` on shutdown.
async fn wait_for_slot(
    slots: &Arc<Semaphore>,
    probe_slots: &Arc<Semaphore>,
    open: &Mutex<Open>,
    epoch: Instant,
    shutdown: &CancellationToken,
) -> Option<Held> {
    loop {
        let before = evictable_before(epoch);
        {
            let open = open.lock().expect("open connections");
            open.evict_one(before, false);
            open.evict_one(before, true);
        }
        tokio::select! {
            p = slots.clone().acquire_owned() => return p.ok().map(|p| Held::Main { _slot: p }),
            p = probe_slots.clone().acquire_owned() => return p.ok().map(|p| Held::Probe { _slot: p }),
            _ = tokio::time::sleep(EVICT_MIN_AGE) => {}
            _ = shutdown.cancelled() => return None,
        }
    }
}

/// The slot a connection holds, released when its last request and the connection are gone.
enum Held {
    /// One of `server.max_connections`.
    Main { _slot: OwnedSemaphorePermit },
    /// One of the `PROBE_SLOTS`, taken at the cap.
    Probe { _slot: OwnedSemaphorePermit },
}

/// What a connection's requests pass before the router: on a probe slot, only a probe goes
/// through at once; any other request first moves the connection to a slot under the cap.
pub(super) struct Gate {
    held: Mutex<Held>,
    slots: Arc<Semaphore>,
    open: Arc<Mutex<Open>>,
    watch: Arc<Watch>,
    epoch: Instant,
}

impl Gate {
    /// `Err` with the answer when the request may not proceed.
    pub(super) async fn admit(&self, req: &request::Parts) -> Result<(), Response> {
        if is_probe(req) || matches!(*self.held.lock().expect("slot"), Held::Main { .. }) {
            return Ok(());
        }
        let give_up = Instant::now() + PROBE_WAIT;
        loop {
            self.open
                .lock()
                .expect("open connections")
                .evict_one(evictable_before(self.epoch), false);
            let wait = EVICT_MIN_AGE.min(give_up.saturating_duration_since(Instant::now()));
            if let Ok(Ok(p)) = tokio::time::timeout(wait, self.slots.clone().acquire_owned()).await
            {
                *self.held.lock().expect("slot") = Held::Main { _slot: p };
                self.watch.set_probe_slot(false);
                return Ok(());
            }
            if Instant::now() >= give_up {
                break;
            }
        }
        metrics::counter!("herald_http_probe_slot_refusals_total").increment(1);
        let mut res = (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({
                "error": "the server is at its connection cap (server.max_connections); try again"
            })),
        )
            .into_response();
        let h = res.headers_mut();
        h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        Err(super::headers::with_secure(res))
    }
}

/// A health or readiness probe: answered on any slot.
fn is_probe(req: &request::Parts) -> bool {
    (req.method == Method::GET || req.method == Method::HEAD)
        && matches!(req.uri.path(), "/healthz" | "/readyz")
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
