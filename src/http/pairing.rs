//! Pairing over the API (behind the bearer token): list pending codes and approve one, for
//! the admin page and for scripts.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::{api_error, HttpState};
use crate::store::StoreError;

pub(super) async fn pending(State(state): State<HttpState>) -> Response {
    match state.store.pairing_pending().await {
        Ok(p) => Json(serde_json::json!({ "pending": p })).into_response(),
        Err(e) => api_error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

#[derive(Deserialize)]
pub(super) struct Approve {
    platform: String,
    code: String,
}

pub(super) async fn approve(State(state): State<HttpState>, Json(req): Json<Approve>) -> Response {
    let code = req.code.trim().to_ascii_uppercase();
    match state.store.pairing_approve(&req.platform, &code).await {
        Ok(r) => {
            tracing::info!(platform = %r.platform, sender = %r.sender_id, "pairing approved");
            Json(serde_json::json!({ "approved": r })).into_response()
        }
        Err(StoreError::NotFound(m)) => api_error(StatusCode::NOT_FOUND, m),
        Err(e) => api_error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}
