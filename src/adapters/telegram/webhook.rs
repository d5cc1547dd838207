//! Webhook mode: `POST <path of telegram.webhook_url>` (`/telegram/webhook` when that URL has
//! no path), merged into the daemon's HTTP server. The local route is the public URL's path,
//! so a reverse proxy that forwards the path unchanged needs no rewrite rule.
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

/// The route when `telegram.webhook_url` has no path of its own.
pub const WEBHOOK_PATH: &str = "/telegram/webhook";

/// The local route for a public webhook URL: its path, or [`WEBHOOK_PATH`] when it has none
/// (`https://host/`), which would otherwise shadow the chat page.
pub fn local_path(webhook_url: &url::Url) -> String {
    match webhook_url.path() {
        "" | "/" => WEBHOOK_PATH.to_string(),
        path => path.to_string(),
    }
}
const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

#[derive(Clone)]
struct WebhookState {
    secret: Arc<str>,
    /// Set once `getMe` answered; until then updates are refused (Telegram retries).
    receiver: Arc<OnceLock<Arc<Receiver>>>,
}

pub fn routes(path: &str, secret: &str, receiver: Arc<OnceLock<Arc<Receiver>>>) -> Router {
    Router::new()
        .route(path, post(handle))
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
    if !crate::config::same_secret(given, st.secret.as_bytes()) {
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

#[cfg(test)]
mod tests {
    use super::local_path;

    #[test]
    fn the_route_is_the_public_urls_path() {
        for (url, path) in [
            ("https://h.example/telegram/webhook", "/telegram/webhook"),
            ("https://h.example/bots/tg-7f3a", "/bots/tg-7f3a"),
            ("https://h.example/hook?x=1", "/hook"),
            ("https://h.example/", "/telegram/webhook"),
            ("https://h.example", "/telegram/webhook"),
        ] {
            assert_eq!(local_path(&url::Url::parse(url).unwrap()), path, "{url}");
        }
    }
}
