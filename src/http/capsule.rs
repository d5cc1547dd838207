//! `GET /api/v1/lanes/{lane}/capsule`: the lane's latest handoff build for operators and
//! watchdogs. The build status is a field of its own, so a degraded capsule (a transcript, not a
//! summary) is visible without reading the text. Read-only.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::json;

use super::{ApiError, HttpState};
use crate::domain::LaneKey;

pub(super) async fn lane_capsule(
    State(state): State<HttpState>,
    Path(lane): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let lane = LaneKey::parse(&lane);
    match state.store.capsule_latest(&lane).await? {
        Some(c) => Ok(Json(json!({
            "lane": c.lane,
            "status": c.status,
            "session_id": c.session_id,
            "text": c.text,
            "pending": c.pending,
            "created_at": c.created_at,
            "message_count": c.message_count,
            "confidential": c.confidential,
        }))),
        None => Err(ApiError::not_found(format!(
            "no handoff capsule for lane {lane}: type \"handoff\" in that chat to write one"
        ))),
    }
}
