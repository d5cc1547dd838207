//! One HTTP/1 connection under the listener's deadlines: the complete request head within
//! `server.header_timeout_secs`, a kept-alive connection idle for at most
//! `server.idle_timeout_secs`, and an early close when the listener needs the slot.
//!
//! hyper's own header-read timer also runs between kept-alive requests, so it cannot give a
//! short header deadline and a long keep-alive together; the watch here does both. It never
//! cuts a request whose handler is still working (a chat waiting for the model may be silent
//! for minutes; the router's whole-request deadline bounds it), only a connection with no
//! request in flight.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// "No value" for the millisecond stamps below.
const NONE: u64 = u64::MAX;

/// The two deadlines, as the listener resolved them from the configuration.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadlines {
    pub header: Duration,
    pub idle: Duration,
}

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
    /// Wakes the connection's task to recompute its deadline.
    changed: Notify,
    /// Set by the listener: close now if no request is in flight.
    evict: CancellationToken,
}

/// Why the watch closed a connection (a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    Header,
    Idle,
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
            changed: Notify::new(),
            evict: CancellationToken::new(),
        })
    }

    fn now(&self) -> u64 {
        ms_since(self.epoch)
    }

    /// Since when this connection has waited without a request in flight, or `None` while one
    /// is running. The listener closes the smallest first when it needs a slot.
    pub(super) fn waiting_since(&self) -> Option<u64> {
        if self.busy.load(Ordering::Acquire) > 0 {
            return None;
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

    /// When the connection must be closed, and why; `None` while a request is in flight.
    fn deadline(&self, d: Deadlines) -> Option<(u64, Expiry)> {
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

/// A response body that keeps its request counted as in flight until hyper drops it.
struct Guarded {
    inner: Body,
    _busy: Busy,
}

impl http_body::Body for Guarded {
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
    deadlines: Deadlines,
    shutdown: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(Watched {
        io: stream,
        watch: watch.clone(),
    });
    let svc_watch = watch.clone();
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        let busy = Busy::enter(&svc_watch);
        req.extensions_mut().insert(ConnectInfo(peer));
        let router = router.clone();
        async move {
            let res = router.oneshot(req).await;
            res.map(|r| r.map(|inner| Guarded { inner, _busy: busy }))
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
