//! A cap on one credential's requests in flight (an `[[api.keys]]` key, the web token, the
//! trusted local operator): past it, a request is answered 429 with `Retry-After` before its
//! body is read.
//!
//! The connection cap alone let one valid key hold every slot with slow uploads; with this a
//! key holds at most its own share, whatever its client does. A request counts from its
//! admission by the guard to the end of its response body (a streamed answer included).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a client is told to wait before trying again, in seconds.
pub(crate) const RETRY_AFTER_SECS: u64 = 1;

/// One credential's budget of requests in flight.
#[derive(Clone)]
pub(crate) struct InFlight {
    slots: Arc<Semaphore>,
    max: usize,
}

impl InFlight {
    pub(crate) fn new(max: usize) -> InFlight {
        let max = max.max(1);
        InFlight {
            slots: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// The cap, for the refusal's message.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// A place for one more request, or `None` at the cap (counted in a metric by `who`).
    pub(crate) fn try_enter(&self, who: &'static str) -> Option<OwnedSemaphorePermit> {
        let p = self.slots.clone().try_acquire_owned().ok();
        if p.is_none() {
            metrics::counter!("herald_http_in_flight_refusals_total", "credential" => who)
                .increment(1);
        }
        p
    }
}

/// The response, holding `permit` until its body is over.
pub(crate) fn hold(res: Response, permit: OwnedSemaphorePermit) -> Response {
    res.map(|inner| Body::new(Holding::new(inner, permit)))
}

/// A body that keeps `G` alive until hyper drops it: what counts a request as in flight (a
/// credential's permit here, the connection's busy mark in `conn.rs`) lasts to the end of
/// its response, a streamed one included.
pub(crate) struct Holding<G> {
    inner: Body,
    _guard: G,
}

impl<G> Holding<G> {
    pub(crate) fn new(inner: Body, guard: G) -> Holding<G> {
        Holding {
            inner,
            _guard: guard,
        }
    }
}

impl<G: Send + Unpin + 'static> http_body::Body for Holding<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
