//! Webhook mode: `POST /telegram/webhook`, merged into the daemon's HTTP server.
//!
//! Telegram redelivers an update until it gets a 2xx, so the answer is the acknowledgement:
//! 200 only once the update is in the inbox (or deliberately skipped, malformed ones included,
//! so a bad update cannot be redelivered forever), 500 when the store refused it or the bot's
//! identity is not known yet, 401 without the right secret token.
//!
//! Must not: answer 200 before the inbox commit, or compare the secret in a way that leaks it.

use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;

use super::receive::Receiver;

pub const WEBHOOK_PATH: &str = "/telegram/webhook";
const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

#[derive(Clone)]
struct WebhookState {
    secret: Arc<str>,
    /// Set once `getMe` answered; until then updates are refused (Telegram retries).
    receiver: Arc<OnceLock<Arc<Receiver>>>,
}

pub fn routes(secret: &str, receiver: Arc<OnceLock<Arc<Receiver>>>) -> Router {
    Router::new()
        .route(WEBHOOK_PATH, post(handle))
        .with_state(WebhookState {
            secret: Arc::from(secret),
            receiver,
        })
}

async fn handle(State(st): State<WebhookState>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let given = headers
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !constant_time_eq(given, st.secret.as_bytes()) {
        tracing::warn!("telegram webhook call without the right secret token; refused");
        return StatusCode::UNAUTHORIZED;
    }
    let Some(receiver) = st.receiver.get() else {
        tracing::warn!("telegram webhook update before the adapter is ready; Telegram will retry");
        return StatusCode::SERVICE_UNAVAILABLE;
    };
    let raw: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "telegram webhook body is not JSON; skipped");
            return StatusCode::OK;
        }
    };
    match receiver.handle(&raw).await {
        Ok(_) => StatusCode::OK,
        Err(e) => {
            tracing::warn!(error = %e, "cannot store a Telegram webhook update; Telegram will retry");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
