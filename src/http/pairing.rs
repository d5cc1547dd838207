//! Pairing over the API (behind the bearer token): list pending codes and approve one, for
//! the admin page and for scripts.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;

use super::{ApiError, HttpState};
use crate::store::StoreError;

pub(super) async fn pending(
    State(state): State<HttpState>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let p = state.store.pairing_pending().await?;
    Ok(Json(serde_json::json!({ "pending": p })))
}

#[derive(Deserialize)]
pub(super) struct Approve {
    platform: String,
    code: String,
}

pub(super) async fn approve(
    State(state): State<HttpState>,
    Json(req): Json<Approve>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let code = req.code.trim().to_ascii_uppercase();
    let r = match state.store.pairing_approve(&req.platform, &code).await {
        Ok(r) => r,
        Err(StoreError::NotFound(m)) => return Err(ApiError::not_found(m)),
        Err(e) => return Err(e.into()),
    };
    tracing::info!(platform = %r.platform, sender = %r.sender_id, "pairing approved");
    Ok(Json(serde_json::json!({ "approved": r })))
}
