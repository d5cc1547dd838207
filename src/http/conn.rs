//! One HTTP/1 connection under the listener's deadlines: the complete request head within
//! `server.header_timeout_secs`, the request's body within `server.body_timeout_secs` of its
//! head (`body.rs`), a kept-alive connection idle for at most `server.idle_timeout_secs`, and
//! an early close when the listener needs the slot.
//!
//! hyper's own header-read timer also runs between kept-alive requests, so it cannot give a
//! short header deadline and a long keep-alive together; the watch here does both. It never
//! cuts a request whose handler is working (a chat waiting for the model may be silent for
//! minutes; the router's whole-request deadline bounds it). A request still waiting for its
//! body is not working yet: like a connection with no request, it may be closed for a
//! newcomer at the cap, and it ends at the body deadline (408 when the handler was reading
//! it, else a close). Once slow uploads were "in flight" forever and filled every slot.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::body::Timed;
use super::gate::Gate;
use super::inflight::Holding;

/// "No value" for the millisecond stamps below.
const NONE: u64 = u64::MAX;

/// The two deadlines, as the listener resolved them from the configuration.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadlines {
    pub header: Duration,
    pub idle: Duration,
    pub body: Duration,
}

/// After the body deadline, the handler reading the body answers 408 itself; the connection
/// is closed only if the body is still pending this much later (a handler holding it unread).
const BODY_GRACE: Duration = Duration::from_secs(1);

/// What one connection has been doing, shared by its socket, its requests and the listener
/// (which reads it to choose a connection to close at the cap). Times are milliseconds since
/// the listener's `epoch`, so they fit atomics.
pub(super) struct Watch {
    epoch: Instant,
    accepted: u64,
    /// Requests whose handler or response body is still alive.
    busy: AtomicUsize,
    /// A request head arrived at least once: later heads get the keep-alive allowance first.
    served: AtomicBool,
    /// When `busy` last fell to zero.
    idle_since: AtomicU64,
    /// First byte of the next request head since `idle_since`, or `NONE`.
    head_started: AtomicU64,
    /// Last byte read or written.
    last_io: AtomicU64,
    /// When the head of the request now waiting for its body arrived, or `NONE`.
    body_since: AtomicU64,
    /// Wakes the connection's task to recompute its deadline.
    changed: Notify,
    /// Set by the listener: close now if no request is in flight.
    evict: CancellationToken,
    /// Holds one of the probe slots (`serve.rs`), not one under the cap.
    probe_slot: AtomicBool,
}

/// Why the watch closed a connection (a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Header,
    Idle,
    Body,
}

impl Watch {
    pub(super) fn new(epoch: Instant) -> Arc<Watch> {
        let now = ms_since(epoch);
        Arc::new(Watch {
            epoch,
            accepted: now,
            busy: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            idle_since: AtomicU64::new(now),
            head_started: AtomicU64::new(NONE),
            last_io: AtomicU64::new(now),
            body_since: AtomicU64::new(NONE),
            changed: Notify::new(),
            evict: CancellationToken::new(),
            probe_slot: AtomicBool::new(false),
        })
    }

    pub(super) fn set_probe_slot(&self, on: bool) {
        self.probe_slot.store(on, Ordering::Release);
    }

    pub(super) fn on_probe_slot(&self) -> bool {
        self.probe_slot.load(Ordering::Acquire)
    }

    fn now(&self) -> u64 {
        ms_since(self.epoch)
    }

    /// Since when this connection has waited without a request being worked on (none in
    /// flight, or one still waiting for its body), or `None` while one is. The listener
    /// closes the smallest first when it needs a slot.
    pub(super) fn waiting_since(&self) -> Option<u64> {
        if self.busy.load(Ordering::Acquire) > 0 {
            return self.body_pending();
        }
        if !self.served.load(Ordering::Acquire) {
            return Some(self.accepted);
        }
        let idle = self.idle_since.load(Ordering::Acquire);
        Some(idle.max(self.last_io.load(Ordering::Acquire)))
    }

    pub(super) fn evict(&self) {
        self.evict.cancel();
    }

    pub(super) fn evicted(&self) -> bool {
        self.evict.is_cancelled()
    }

    /// When the head of a request still waiting for its body arrived.
    fn body_pending(&self) -> Option<u64> {
        match self.body_since.load(Ordering::Acquire) {
            NONE => None,
            since => Some(since),
        }
    }

    /// A request's head arrived and its body is still to come.
    pub(super) fn body_started(&self) {
        self.body_since.store(self.now(), Ordering::Release);
        self.changed.notify_one();
    }

    /// The body ended, failed or was dropped: the request is being worked on (or is over).
    pub(super) fn body_ended(&self) {
        if self.body_since.swap(NONE, Ordering::AcqRel) != NONE {
            self.changed.notify_one();
        }
    }

    /// When the connection must be closed, and why; `None` while a request is worked on.
    fn deadline(&self, d: Deadlines) -> Option<(u64, Expiry)> {
        if self.busy.load(Ordering::Acquire) > 0 {
            let since = self.body_pending()?;
            let ms = (d.body + BODY_GRACE).as_millis() as u64;
            return Some((since + ms, Expiry::Body));
        }
        let since = self.waiting_since()?;
        let header = d.header.as_millis() as u64;
        if !self.served.load(Ordering::Acquire) {
            // The first head counts from accept: a silent socket and a slow one are alike.
            return Some((self.accepted + header, Expiry::Header));
        }
        match self.head_started.load(Ordering::Acquire) {
            NONE => Some((since + d.idle.as_millis() as u64, Expiry::Idle)),
            started => Some((started + header, Expiry::Header)),
        }
    }

    fn on_read(&self) {
        let now = self.now();
        self.last_io.store(now, Ordering::Release);
        if self.busy.load(Ordering::Acquire) == 0
            && self
                .head_started
                .compare_exchange(NONE, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // The keep-alive allowance ends: the (shorter) header deadline starts.
            self.changed.notify_one();
        }
    }

    fn on_write(&self) {
        self.last_io.store(self.now(), Ordering::Release);
    }
}

fn ms_since(epoch: Instant) -> u64 {
    epoch.elapsed().as_millis() as u64
}

/// Held from a request's head to the end of its response body (a streamed answer included).
struct Busy(Arc<Watch>);

impl Busy {
    fn enter(watch: &Arc<Watch>) -> Busy {
        watch.served.store(true, Ordering::Release);
        watch.busy.fetch_add(1, Ordering::AcqRel);
        watch.head_started.store(NONE, Ordering::Release);
        watch.changed.notify_one();
        Busy(watch.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let w = &self.0;
        w.idle_since.store(w.now(), Ordering::Release);
        w.head_started.store(NONE, Ordering::Release);
        if w.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            w.changed.notify_one();
        }
    }
}

/// The socket, stamping the watch on every byte that moves.
struct Watched {
    io: TcpStream,
    watch: Arc<Watch>,
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.watch.on_read();
        }
        res
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.io).poll_write(cx, buf);
        if matches!(res, Poll::Ready(Ok(n)) if n > 0) {
            this.watch.on_write();
        }
        res
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if matches!(res, Poll::Ready(Ok(n)) if n > 0) {
            this.watch.on_write();
        }
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Serves one accepted connection until the client leaves, a deadline passes, the listener
/// evicts it, or shutdown (which lets a running request finish).
pub(super) async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    watch: Arc<Watch>,
    gate: Arc<Gate>,
    deadlines: Deadlines,
    shutdown: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(Watched {
        io: stream,
        watch: watch.clone(),
    });
    let svc_watch = watch.clone();
    let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let busy = Busy::enter(&svc_watch);
        let (mut parts, incoming) = req.into_parts();
        parts.extensions.insert(ConnectInfo(peer));
        let (router, gate, watch) = (router.clone(), gate.clone(), svc_watch.clone());
        async move {
            let guarded = |inner: Body| Holding::new(inner, busy);
            // A request waiting here for a slot under the cap is complete as far as the
            // client knows: it is not closed for a newcomer; its body's clock starts after.
            if let Err(refused) = gate.admit(&parts).await {
                return Ok(refused.map(guarded));
            }
            let body = Timed::new(incoming, watch, deadlines.body);
            let path = parts.uri.path().to_string();
            let expired = body.expired();
            let res = router
                .oneshot(hyper::Request::from_parts(parts, body))
                .await?;
            // The handler answered a body that missed its deadline (a 400 for a broken body,
            // most likely): the client is told the real reason.
            let res = match expired.load(Ordering::Acquire) {
                true => super::body::expired_response(&path),
                false => res,
            };
            Ok::<_, std::convert::Infallible>(res.map(guarded))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Our watch owns the header deadline (see the module comment).
    builder.header_read_timeout(None);
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    let mut draining = false;
    loop {
        let deadline = watch.deadline(deadlines);
        let sleep = tokio::time::sleep_until(match deadline {
            Some((ms, _)) => watch.epoch + Duration::from_millis(ms),
            None => Instant::now() + Duration::from_secs(86_400),
        });
        tokio::select! {
            res = conn.as_mut() => {
                if let Err(e) = res {
                    tracing::debug!(error = %e, "HTTP connection ended with an error");
                }
                return;
            }
            _ = watch.changed.notified() => {}
            _ = sleep => {
                // A request may have arrived in between; only a deadline still due closes.
                if let Some((ms, why)) = watch.deadline(deadlines) {
                    if ms <= watch.now() {
                        let reason = match why {
                            Expiry::Header => "header_timeout",
                            Expiry::Idle => "idle_timeout",
                            Expiry::Body => "body_timeout",
                        };
                        metrics::counter!("herald_http_connections_closed_total", "reason" => reason)
                            .increment(1);
                        return;
                    }
                }
            }
            _ = watch.evict.cancelled(), if watch.waiting_since().is_some() => {
                // A head may have arrived in the same wake-up: that request finishes, and the
                // branch stays off until the connection is idle again.
                if watch.waiting_since().is_some() {
                    metrics::counter!("herald_http_connections_closed_total", "reason" => "evicted")
                        .increment(1);
                    return;
                }
            }
            _ = shutdown.cancelled(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}
