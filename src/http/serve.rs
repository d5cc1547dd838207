//! The listener's accept loop: a cap on open connections, each served under the deadlines of
//! `conn.rs`, every task on the app's tracker, graceful shutdown on its token.
//!
//! One client must not be able to take the daemon down by opening sockets: without a cap,
//! idle connections used every file descriptor and the store, model and platform clients
//! failed with them. So at most `server.max_connections` are open (never more than half the
//! open-file limit); at the cap a new connection closes the one that has waited longest with
//! no request in flight, and when every open connection has a request running, new ones wait
//! in the kernel's backlog (which holds no descriptor of ours). Accept errors (out of
//! descriptors, out of memory) back off instead of spinning; they never end the loop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

    /// Asks the connection that has waited longest without a request in flight, and since at
    /// most `before` (ms of the listener's clock), to close; false when there is none.
    fn evict_one(&self, before: u64) -> bool {
        let victim = self
            .conns
            .values()
            .filter(|w| !w.evicted())
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
                open.lock().expect("open connections").evict_one(u64::MAX);
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
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                note_cap(&mut cap_warned, limits.max_connections);
                match wait_for_slot(&slots, &open, epoch, &shutdown).await {
                    Some(p) => p,
                    None => return,
                }
            }
        };
        let watch = Watch::new(epoch);
        let id = open.lock().expect("open connections").add(watch.clone());
        let (open, router, gauge) = (open.clone(), router.clone(), gauge.clone());
        let conn_shutdown = shutdown.clone();
        gauge.increment(1.0);
        tracker.spawn(async move {
            conn::serve(stream, peer, router, watch, limits.deadlines, conn_shutdown).await;
            open.lock().expect("open connections").conns.remove(&id);
            gauge.decrement(1.0);
            drop(permit);
        });
    }
}

/// A slot for the connection just accepted: closes the longest-waiting idle connection once
/// it is old enough, else waits for any connection to end. `None` on shutdown.
async fn wait_for_slot(
    slots: &Arc<Semaphore>,
    open: &Mutex<Open>,
    epoch: Instant,
    shutdown: &CancellationToken,
) -> Option<OwnedSemaphorePermit> {
    loop {
        let before = (epoch.elapsed().saturating_sub(EVICT_MIN_AGE)).as_millis() as u64;
        open.lock().expect("open connections").evict_one(before);
        tokio::select! {
            p = slots.clone().acquire_owned() => return p.ok(),
            _ = tokio::time::sleep(EVICT_MIN_AGE) => {}
            _ = shutdown.cancelled() => return None,
        }
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
