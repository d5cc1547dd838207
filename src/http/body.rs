//! The deadline for reading a request's body (`server.body_timeout_secs`, counted from its
//! head): a client that sends its body a byte at a time cannot hold a request open.
//!
//! The connection's body is wrapped before the router sees it. While it is still to come, the
//! connection's watch counts the request as waiting, not worked on (`conn.rs`): the listener
//! may close it for a newcomer at the cap. At the deadline the next read of the body fails;
//! the handler's answer to that failure is replaced by a 408 with `Connection: close` (in
//! OpenAI's error shape on `/v1/`), so the client learns why.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::Sleep;

use super::conn::Watch;
use super::openai::OaiError;
use super::ApiError;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const LATE: &str = "the request body did not arrive within server.body_timeout_secs";

/// What a handler reading the body sees at the deadline.
fn late() -> BoxError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, LATE).into()
}

/// A request body under its deadline.
pub(super) struct Timed {
    inner: Incoming,
    watch: Arc<Watch>,
    /// While the body is still to come; `None` once it ended (or there was none).
    deadline: Option<Pin<Box<Sleep>>>,
    expired: Arc<AtomicBool>,
}

impl Timed {
    /// Starts the body's clock (when it has a body at all).
    pub(super) fn new(inner: Incoming, watch: Arc<Watch>, limit: Duration) -> Timed {
        let deadline = (!http_body::Body::is_end_stream(&inner)).then(|| {
            watch.body_started();
            Box::pin(tokio::time::sleep(limit))
        });
        Timed {
            inner,
            watch,
            deadline,
            expired: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Set once the deadline passed with the body incomplete.
    pub(super) fn expired(&self) -> Arc<AtomicBool> {
        self.expired.clone()
    }

    fn end(&mut self) {
        if self.deadline.take().is_some() {
            self.watch.body_ended();
        }
    }
}

impl Drop for Timed {
    fn drop(&mut self) {
        self.end();
    }
}

impl http_body::Body for Timed {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.expired.load(Ordering::Acquire) {
            return Poll::Ready(Some(Err(late())));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if this.inner.is_end_stream() {
                    this.end();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(other) => {
                this.end();
                Poll::Ready(other.map(|r| r.map_err(Into::into)))
            }
            Poll::Pending => {
                let Some(deadline) = this.deadline.as_mut() else {
                    return Poll::Pending;
                };
                match deadline.as_mut().poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => {
                        this.expired.store(true, Ordering::Release);
                        this.end();
                        metrics::counter!("herald_http_body_timeouts_total").increment(1);
                        Poll::Ready(Some(Err(late())))
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        !self.expired.load(Ordering::Acquire) && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The answer to a request whose body missed its deadline; the connection closes after it
/// (the rest of the body is never read).
pub(super) fn expired_response(path: &str) -> Response {
    let mut res = if path.starts_with("/v1/") {
        OaiError::request_timeout(LATE).into_response()
    } else {
        ApiError::new(StatusCode::REQUEST_TIMEOUT, LATE).into_response()
    };
    res.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    super::headers::with_secure(res)
}
