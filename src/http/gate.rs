//! A connection's gate: what each of its requests passes before the router. On a slot under
//! the cap everything goes through; on a probe slot (beyond `server.max_connections`, kept for
//! health and readiness) a probe is answered at once, and any other request must first move
//! the connection to a slot under the cap — closing a waiting connection, or waiting for one
//! to free — within `PROBE_WAIT`, else it is answered 503 with `Retry-After`.
//!
//! The accept loop (`serve.rs`) hands out the slots; this is the one place a request waits
//! for one, so the loop itself never waits while a probe could be taken.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{header, request, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use super::conn::Watch;
use super::serve::{evictable_before, Held, Open, Slots, EVICT_MIN_AGE};

/// How long a request other than a probe, on a probe slot, may wait for a slot under the cap
/// (asking a waiting connection to close every `EVICT_MIN_AGE`) before it is answered 503.
const PROBE_WAIT: Duration = Duration::from_secs(1);

/// What a connection's requests pass before the router: on a probe slot, only a probe goes
/// through at once; any other request first moves the connection to a slot under the cap.
/// Also where the listener takes a closing connection's slot from.
pub(crate) struct Gate {
    pub(super) held: Mutex<Option<Held>>,
    pub(super) slots: Slots,
    pub(super) open: Arc<Mutex<Open>>,
    pub(super) watch: Arc<Watch>,
    pub(super) epoch: Instant,
}

impl Gate {
    /// `Err` with the answer when the request may not proceed.
    pub(super) async fn admit(&self, req: &request::Parts) -> Result<(), Response> {
        // No slot: it went to a newcomer while this head was arriving. The connection closes
        // after this request; a probe is answered, anything else needs a slot first.
        let on_probe = match &*self.held.lock().expect("slot") {
            Some(h) => h.probe,
            None => true,
        };
        if !on_probe || is_probe(req) {
            return Ok(());
        }
        let give_up = Instant::now() + PROBE_WAIT;
        let _waiting = Waiting::enter(&self.slots.waiting);
        loop {
            let taken = self
                .open
                .lock()
                .expect("open connections")
                .evict_one(evictable_before(self.epoch), false);
            let main = match taken {
                Some(h) => Some(h),
                None => {
                    let wait = EVICT_MIN_AGE.min(give_up.saturating_duration_since(Instant::now()));
                    match tokio::time::timeout(wait, self.slots.main.clone().acquire_owned()).await
                    {
                        Ok(Ok(p)) => Some(Held::new(p, false)),
                        _ => None,
                    }
                }
            };
            if let Some(h) = main {
                *self.held.lock().expect("slot") = Some(h);
                self.watch.set_probe_slot(false);
                return Ok(());
            }
            if Instant::now() >= give_up {
                break;
            }
        }
        metrics::counter!("herald_http_probe_slot_refusals_total").increment(1);
        Err(busy())
    }
}

/// Counts a request waiting for a slot under the cap while it lives.
struct Waiting(Arc<AtomicUsize>);

impl Waiting {
    fn enter(n: &Arc<AtomicUsize>) -> Waiting {
        n.fetch_add(1, Ordering::AcqRel);
        Waiting(n.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The answer to a request that found no slot under the cap: 503, try again in a second.
fn busy() -> Response {
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
    super::headers::with_secure(res)
}

/// A health or readiness probe: answered on any slot.
fn is_probe(req: &request::Parts) -> bool {
    (req.method == Method::GET || req.method == Method::HEAD)
        && matches!(req.uri.path(), "/healthz" | "/readyz")
}
