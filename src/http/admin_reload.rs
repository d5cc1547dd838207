//! The configuration reload over the admin API: `POST /api/v1/admin/reload` re-reads the
//! daemon's config (what `herald reload` calls) and answers the report, or 422 with the
//! error when the file is invalid (nothing changed then); `GET /api/v1/admin/config` is the
//! generation, the last refused reload's error and the keys waiting for a restart.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::HttpState;

pub(super) async fn reload(State(state): State<HttpState>) -> Response {
    match state.reload.reload().await {
        Ok(report) => {
            Json(json!({ "report": report, "status": state.reload.status() })).into_response()
        }
        Err(e) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({ "error": e, "status": state.reload.status() })),
        )
            .into_response(),
    }
}

pub(super) async fn status(State(state): State<HttpState>) -> Json<serde_json::Value> {
    Json(json!({ "config": state.reload.status() }))
}
