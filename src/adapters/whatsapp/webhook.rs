//! The webhook route (`whatsapp.webhook_path`, `/whatsapp/webhook` by default), merged into the
//! daemon's HTTP server.
//!
//! `GET` is Meta's verification: `hub.mode=subscribe`, `hub.verify_token` (compared in
//! constant time with `whatsapp.verify_token`) and `hub.challenge`, answered with the
//! challenge; anything else is 403. `POST` is checked first: `X-Hub-Signature-256`, the app
//! secret's HMAC over the raw body, in constant time, else 401 logged with the reason and never
//! the body. Meta redelivers a POST that gets no 200 (for up to 7 days), so 200 means "in the
//! inbox" (or deliberately skipped: a body that does not read never would); 500 when the store
//! refused it, 503 before the adapter started.
//!
//! Must not: answer 200 before the inbox write, or log a body.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::receive::Receiver;
use super::signature::{self, SIGNATURE_HEADER};
use crate::config::same_secret;

#[derive(Clone)]
struct HookState {
    app_secret: Arc<str>,
    verify_token: Arc<str>,
    receiver: Arc<OnceLock<Arc<Receiver>>>,
}

pub fn routes(
    path: &str,
    app_secret: &str,
    verify_token: &str,
    receiver: Arc<OnceLock<Arc<Receiver>>>,
) -> Router {
    Router::new()
        .route(path, get(verify).post(receive))
        .with_state(HookState {
            app_secret: Arc::from(app_secret),
            verify_token: Arc::from(verify_token),
            receiver,
        })
}

async fn verify(State(st): State<HookState>, Query(q): Query<HashMap<String, String>>) -> Response {
    let field = |k: &str| q.get(k).map(String::as_str);
    let token_ok = field("hub.verify_token")
        .is_some_and(|t| same_secret(t.as_bytes(), st.verify_token.as_bytes()));
    match (field("hub.mode"), field("hub.challenge")) {
        (Some("subscribe"), Some(challenge)) if token_ok => {
            tracing::info!("whatsapp webhook verified by Meta");
            challenge.to_string().into_response()
        }
        _ => {
            tracing::warn!("whatsapp webhook verification refused: wrong hub.verify_token or mode");
            StatusCode::FORBIDDEN.into_response()
        }
    }
}

async fn receive(State(st): State<HookState>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let header = headers.get(SIGNATURE_HEADER).and_then(|v| v.to_str().ok());
    if let Err(refused) = signature::check(&st.app_secret, header, &body) {
        tracing::warn!(reason = %refused, "whatsapp webhook refused: not signed with the app secret");
        metrics::counter!("herald_whatsapp_refused_requests_total", "reason" => refused.as_str())
            .increment(1);
        return StatusCode::UNAUTHORIZED;
    }
    let Some(receiver) = st.receiver.get() else {
        tracing::warn!("whatsapp webhook before the adapter is ready; Meta will retry");
        return StatusCode::SERVICE_UNAVAILABLE;
    };
    let Ok(envelope) = serde_json::from_slice::<serde_json::Value>(&body) else {
        tracing::warn!("whatsapp webhook body is not JSON; skipped");
        return StatusCode::OK;
    };
    match receiver.handle(&envelope).await {
        Ok(_) => StatusCode::OK,
        Err(e) => {
            tracing::warn!(error = %e, "cannot store a whatsapp webhook; Meta will retry");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}
