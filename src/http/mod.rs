//! The HTTP surface (axum): web chat page and JSON API, health, readiness and metrics.
//!
//! API routes require the bearer token when one is configured; without one, config validation
//! has already refused any non-loopback listen address. Health and metrics stay open for
//! probes and scrapers.

mod chat;
mod health;
mod page;
mod pairing;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::json;

use crate::lanes::LaneRouter;

#[derive(Clone)]
pub struct HttpState {
    pub router: Arc<LaneRouter>,
    pub metrics: PrometheusHandle,
}

/// The daemon's routes plus adapters' own (e.g. the Telegram webhook).
pub fn routes(state: HttpState, extra: Vec<Router>) -> Router {
    let api = Router::new()
        .route("/api/v1/chat", post(chat::post_chat))
        .route("/api/v1/lanes/{lane}/messages", get(chat::lane_messages))
        .route("/api/v1/pairing", get(pairing::pending))
        .route("/api/v1/pairing/approve", post(pairing::approve))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    let mut app = Router::new()
        .route("/", get(page::chat_page))
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .merge(api)
        .with_state(state);
    for r in extra {
        app = app.merge(r);
    }
    app.layer(axum::extract::DefaultBodyLimit::max(1024 * 1024))
}

/// Serves until `shutdown` fires; returns the bound address through `bound`.
pub async fn bind(addr: &str) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

async fn require_token(State(state): State<HttpState>, req: Request, next: Next) -> Response {
    let Some(token) = state.router.deps().config.web.token.as_ref() else {
        return next.run(req).await;
    };
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.expose().as_bytes())) {
        next.run(req).await
    } else {
        api_error(
            StatusCode::UNAUTHORIZED,
            "missing or wrong bearer token: send Authorization: Bearer <web.token>",
        )
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Every API error is JSON with a message a person can act on.
pub(crate) fn api_error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}
