//! Approvals from the web chat: the page lists the pending requests of its conversation and
//! answers one with `POST /api/v1/approvals/{id}`.
//!
//! Both routes sit behind the API guard (the same callers as `POST /api/v1/chat`), and a web
//! caller can only answer a request of a web conversation, the one it names: the approval desk
//! checks the chat, as it does for a button pressed on Telegram or Discord.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, HttpState};
use crate::domain::{LaneKey, Platform};
use crate::lanes::{Press, PressOutcome};

#[derive(Deserialize)]
pub(super) struct Answer {
    /// The conversation the page shows (`web:<name>`).
    lane: String,
    approve: bool,
    #[serde(default)]
    sender: Option<String>,
}

/// `GET /api/v1/lanes/{lane}/approvals`: the web conversation's pending requests.
pub(super) async fn pending(
    State(state): State<HttpState>,
    Path(lane): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    if !lane.starts_with("web:") {
        return Err(ApiError::bad_request(
            "only web conversations (web:<name>) answer approvals here",
        ));
    }
    let rows = state
        .approvals
        .pending(Some(&LaneKey::new(&lane)))
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "cannot list pending approvals");
            ApiError::unavailable("the store is unavailable")
        })?;
    let rows: Vec<_> = rows
        .into_iter()
        .map(|r| {
            json!({"id": r.id, "tool": r.tool, "arguments": r.arguments,
                "deadline": r.deadline})
        })
        .collect();
    Ok(Json(json!({"lane": lane, "approvals": rows})))
}

/// `POST /api/v1/approvals/{id}` with `{"lane": "web:<name>", "approve": true}`.
pub(super) async fn answer(
    State(state): State<HttpState>,
    Path(id): Path<String>,
    body: Result<Json<Answer>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Ok(Json(a)) = body else {
        return Err(ApiError::bad_request(
            "the body must be JSON like {\"lane\": \"web:alice\", \"approve\": true}",
        ));
    };
    let Some(name) = a.lane.strip_prefix("web:").filter(|n| !n.is_empty()) else {
        return Err(ApiError::bad_request("lane must be \"web:<name>\""));
    };
    if id.len() > 64 || a.sender.as_deref().is_some_and(|s| s.chars().count() > 128) {
        return Err(ApiError::bad_request("id or sender is too long"));
    }
    let press = Press {
        approval_id: id,
        approve: a.approve,
        platform: Platform::WEB,
        chat_id: name.to_string(),
        sender_id: a.sender.unwrap_or_else(|| name.to_string()),
        sender_roles: Vec::new(),
    };
    let outcome = state.approvals.press(&press).await;
    let status = match outcome {
        PressOutcome::Approved | PressOutcome::Denied => StatusCode::OK,
        PressOutcome::NotYours | PressOutcome::OnlyRequester(_) => StatusCode::FORBIDDEN,
        PressOutcome::NotOpen => StatusCode::CONFLICT,
    };
    Ok((
        status,
        Json(json!({"outcome": outcome.as_str(), "message": outcome.text()})),
    )
        .into_response())
}
