//! The HTTP surface (axum): web chat page and JSON API, health, readiness and metrics.
//!
//! Every route is one row of [`table`], with the guard it answers behind (see `access.rs`)
//! and the feature it belongs to: a route of a disabled feature is not mounted at all. The
//! table is also what the end-to-end auth test walks, so a route cannot exist without being
//! tested for who can call it.

mod access;
mod admin;
mod admin_hooks;
mod admin_reload;
mod admin_spend;
mod approvals;
mod body;
mod capsule;
mod chat;
mod chat_events;
mod chat_stream;
mod conn;
mod error;
mod gate;
mod headers;
mod health;
mod hooks;
mod inflight;
mod media;
pub mod openai;
mod page;
mod pairing;
pub mod serve;
mod turn_watch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tower::ServiceBuilder;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnFailure, TraceLayer};

use axum::extract::{FromRef, MatchedPath};
use axum::http::{Method, StatusCode};
use axum::middleware;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;

pub use access::{Access, Caller, Guard, PROXY_HEADERS};
pub use headers::CSP;

use crate::config::Config;
use crate::lanes::{Approvals, Ingest, LaneView};
use crate::store::Store;
pub(crate) use error::ApiError;

/// What the handlers use, each named: the server gets no router and no dependency bag, so a
/// handler cannot reach a worker or another edge through it.
#[derive(Clone, FromRef)]
pub struct HttpState {
    pub config: Arc<Config>,
    pub store: Arc<dyn Store>,
    /// Writes chat events to the inbox and wakes their lane.
    pub ingest: Ingest,
    /// Which lanes have a turn running here (admin page, the busy gauge).
    pub lanes: LaneView,
    /// Names shown on the admin page.
    #[from_ref(skip)]
    pub replica_id: String,
    #[from_ref(skip)]
    pub model: String,
    pub metrics: PrometheusHandle,
    pub access: Arc<Access>,
    /// Takes answers to approval requests (the web chat's buttons).
    pub approvals: Approvals,
    /// The `[[api.keys]]` of the OpenAI-compatible API (`openai/`), read at start.
    #[from_ref(skip)]
    pub api_keys: openai::ApiKeys,
    /// The `[[hooks]]` receivers (`hooks.rs`, `crate::webhooks`).
    #[from_ref(skip)]
    pub webhooks: Arc<crate::webhooks::Inbound>,
    /// The live configuration reload (`admin_reload.rs`, `crate::reload`).
    #[from_ref(skip)]
    pub reload: Arc<crate::reload::Reloader>,
}

/// Largest request body accepted anywhere; a bigger one answers 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// One mounted route: its method and path as the client sends them, who may call it, and the
/// handler.
pub struct RouteRow {
    pub method: Method,
    pub path: &'static str,
    pub guard: Guard,
    handler: MethodRouter<HttpState>,
}

fn row(
    method: Method,
    path: &'static str,
    guard: Guard,
    handler: MethodRouter<HttpState>,
) -> RouteRow {
    RouteRow {
        method,
        path,
        guard,
        handler,
    }
}

/// Every route this configuration mounts (adapters' own routes, e.g. the Telegram webhook with
/// its secret header, come on top).
pub fn table(config: &Config) -> Vec<RouteRow> {
    use Guard::{Api, Open};
    let mut t = vec![
        row(Method::GET, "/healthz", Open, get(health::healthz)),
        row(Method::GET, "/readyz", Open, get(health::readyz)),
        // Counters by platform, status and provider: no lane, person or text in any label.
        row(Method::GET, "/metrics", Open, get(health::metrics)),
        // The page holds no data; its script sends the token the operator types.
        row(Method::GET, "/admin", Open, get(admin::page)),
        row(Method::GET, "/favicon.ico", Open, get(page::favicon)),
        row(
            Method::GET,
            "/api/v1/lanes/{lane}/messages",
            Api,
            get(chat::lane_messages),
        ),
        row(
            Method::GET,
            "/api/v1/lanes/{lane}/capsule",
            Api,
            get(capsule::lane_capsule),
        ),
    ];
    t.extend(admin::api_rows());
    // Always mounted, so a reload can add the first hook; an unknown name is 404.
    t.push(row(
        Method::POST,
        "/hooks/{name}",
        Guard::Signed,
        post(hooks::receive),
    ));
    if config.web.enabled {
        t.push(row(Method::GET, "/", Open, get(page::chat_page)));
        t.push(row(
            Method::POST,
            "/api/v1/chat",
            Api,
            post(chat::post_chat),
        ));
        t.push(row(
            Method::GET,
            "/api/v1/lanes/{lane}/approvals",
            Api,
            get(approvals::pending),
        ));
        // The page's live view of a lane and its earlier sessions (`chat_events.rs`).
        t.push(row(
            Method::GET,
            "/api/v1/lanes/{lane}/events",
            Api,
            get(chat_events::lane_events),
        ));
        t.push(row(
            Method::GET,
            "/api/v1/lanes/{lane}/sessions",
            Api,
            get(chat_events::lane_sessions),
        ));
        t.push(row(
            Method::GET,
            "/api/v1/lanes/{lane}/sessions/{id}/messages",
            Api,
            get(chat_events::session_messages),
        ));
        t.push(row(
            Method::POST,
            "/api/v1/approvals/{id}",
            Api,
            post(approvals::answer),
        ));
        // A file a reply sent to this web lane (`media.rs`).
        t.push(row(
            Method::GET,
            "/api/v1/lanes/{lane}/media/{sha}",
            Api,
            get(media::lane_file),
        ));
    }
    if config.api.enabled {
        t.extend(openai::rows());
    }
    if config.pairing.enabled {
        t.push(row(
            Method::GET,
            "/api/v1/pairing",
            Api,
            get(pairing::pending),
        ));
        t.push(row(
            Method::POST,
            "/api/v1/pairing/approve",
            Api,
            post(pairing::approve),
        ));
    }
    t
}

/// The daemon's routes plus adapters' own (e.g. the Telegram webhook).
pub fn routes(state: HttpState, config: &Config, extra: Vec<Router>) -> Router {
    let mut app = Router::new();
    for r in table(config) {
        let handler = match r.guard {
            // The hook's handler checks its signature itself (it needs the raw body).
            Guard::Open | Guard::Signed => r.handler,
            Guard::Api => r.handler.route_layer(middleware::from_fn_with_state(
                state.clone(),
                access::require,
            )),
            Guard::ApiKey => r.handler.route_layer(middleware::from_fn_with_state(
                state.clone(),
                openai::require,
            )),
        };
        app = app.route(r.path, handler);
    }
    let mut app = app.with_state(state);
    for r in extra {
        app = app.merge(r);
    }
    // A chat request waits for its reply up to `web.reply_timeout_secs`; nothing else comes
    // close. The span names the matched route, never the raw URI (a webhook path or a query
    // may carry something private).
    let deadline = Duration::from_secs(config.web.reply_timeout_secs.saturating_add(30));
    let layers = ServiceBuilder::new()
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|req: &axum::http::Request<_>| {
                    let route = req
                        .extensions()
                        .get::<MatchedPath>()
                        .map(|p| p.as_str().to_string())
                        .unwrap_or_else(|| "(unmatched)".into());
                    tracing::debug_span!("http", method = %req.method(), route = %route)
                })
                // A 503 from /readyz while the database is away is the probe working, not an
                // error line every few seconds; handlers log what went wrong themselves.
                .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            deadline,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES));
    app.layer(layers)
        .layer(middleware::map_response(headers::secure))
}

/// Connections the kernel may queue for the accept loop (clamped to `net.core.somaxconn`).
/// tokio's default of 1024 overflowed under a flood of 1,100 clients: a probe's SYN was
/// dropped and it waited 1 s, then 3 s, for its retransmit.
const LISTEN_BACKLOG: u32 = 4096;

/// The listening socket on `addr` and the address it got.
pub async fn bind(addr: SocketAddr) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As `TcpListener::bind` does: a restarted daemon can bind while old sockets linger.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    let listener = socket.listen(LISTEN_BACKLOG)?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}
