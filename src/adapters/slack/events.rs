//! The Events API (`slack.mode = "events"`): Slack POSTs signed requests to
//! `/slack/events` (event callbacks and the `url_verification` challenge), `/slack/interactive`
//! (button presses, form `payload=<json>`) and `/slack/commands` (the `/herald` slash command,
//! form fields), merged into the daemon's HTTP server.
//!
//! Every request is checked first: the v0 signature over the raw body with the signing
//! secret, in constant time, and the timestamp within five minutes; anything else is 401,
//! logged with the reason and never the body. Slack redelivers a callback that gets no 2xx
//! within three seconds (`X-Slack-Retry-Num`), so 200 means "in the inbox" (or deliberately
//! skipped: a payload that does not read would never read); 500 when the store refused it,
//! 503 before `auth.test` answered. A retry dedupes in the inbox on the message key.
//!
//! Must not: answer 200 before the inbox write, or log a body.

use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::Value;

use super::receive::{Kind, Receiver};
use super::signature::{self, SIGNATURE_HEADER, TIMESTAMP_HEADER};

pub const EVENTS_PATH: &str = "/slack/events";
pub const INTERACTIVE_PATH: &str = "/slack/interactive";
pub const COMMANDS_PATH: &str = "/slack/commands";

#[derive(Clone)]
struct EventsState {
    secret: Arc<str>,
    /// Set once `auth.test` answered; until then requests get 503 (Slack retries).
    receiver: Arc<OnceLock<Arc<Receiver>>>,
}

pub fn routes(secret: &str, receiver: Arc<OnceLock<Arc<Receiver>>>) -> Router {
    Router::new()
        .route(EVENTS_PATH, post(events))
        .route(INTERACTIVE_PATH, post(interactive))
        .route(COMMANDS_PATH, post(commands))
        .with_state(EventsState {
            secret: Arc::from(secret),
            receiver,
        })
}

/// The signature check every route starts with; `Err` is the 401 to answer.
fn verified(
    st: &EventsState,
    route: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), StatusCode> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = chrono::Utc::now().timestamp();
    match signature::check(
        &st.secret,
        header(TIMESTAMP_HEADER),
        header(SIGNATURE_HEADER),
        body,
        now,
    ) {
        Ok(()) => Ok(()),
        Err(refused) => {
            tracing::warn!(route, reason = %refused, "slack request refused: not signed by Slack");
            metrics::counter!("herald_slack_refused_requests_total", "reason" => refused.as_str())
                .increment(1);
            Err(StatusCode::UNAUTHORIZED)
        }
    }
}

async fn events(State(st): State<EventsState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(status) = verified(&st, EVENTS_PATH, &headers, &body) {
        return status.into_response();
    }
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        tracing::warn!("slack events body is not JSON; skipped");
        return StatusCode::OK.into_response();
    };
    if v.get("type").and_then(Value::as_str) == Some("url_verification") {
        let challenge = v.get("challenge").cloned().unwrap_or(Value::Null);
        return Json(serde_json::json!({ "challenge": challenge })).into_response();
    }
    if let Some(n) = headers
        .get("x-slack-retry-num")
        .and_then(|v| v.to_str().ok())
    {
        tracing::debug!(retry = n, "slack redelivered an event");
    }
    handle(&st, Kind::Event, &v).await
}

async fn interactive(State(st): State<EventsState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(status) = verified(&st, INTERACTIVE_PATH, &headers, &body) {
        return status.into_response();
    }
    let payload = url::form_urlencoded::parse(&body)
        .find(|(k, _)| k == "payload")
        .and_then(|(_, v)| serde_json::from_str::<Value>(&v).ok());
    let Some(payload) = payload else {
        tracing::warn!("slack interactive request without a readable payload; skipped");
        return StatusCode::OK.into_response();
    };
    handle(&st, Kind::Interactive, &payload).await
}

async fn commands(State(st): State<EventsState>, headers: HeaderMap, body: Bytes) -> Response {
    if let Err(status) = verified(&st, COMMANDS_PATH, &headers, &body) {
        return status.into_response();
    }
    let fields: serde_json::Map<String, Value> = url::form_urlencoded::parse(&body)
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    handle(&st, Kind::Command, &Value::Object(fields)).await
}

async fn handle(st: &EventsState, kind: Kind, payload: &Value) -> Response {
    let Some(receiver) = st.receiver.get() else {
        tracing::warn!("slack request before the adapter is ready; Slack will retry");
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    match receiver.handle(kind, payload).await {
        Ok(_) => StatusCode::OK.into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot store a Slack event; Slack will retry");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
