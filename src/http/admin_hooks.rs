//! The admin page's webhooks: `GET /api/v1/admin/hooks` lists each `[[hooks]]` table (name,
//! mode, signature kind, targets; never its secret) with its last runs from the cron ledger
//! (time, delivery id, status, note).

use axum::extract::State;
use axum::Json;
use serde_json::json;

use super::{ApiError, HttpState};

/// Runs shown per hook.
const LAST: i64 = 5;

pub(super) async fn hooks(
    State(state): State<HttpState>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let mut out = Vec::new();
    for h in &state.config.hooks {
        let fires = state.store.cron_fires(Some(&h.job()), LAST).await?;
        let last: Vec<_> = fires
            .iter()
            .map(|f| {
                json!({
                    "at": f.scheduled_at,
                    "status": f.status,
                    "note": f.note,
                    "deliveries": f.deliveries,
                })
            })
            .collect();
        out.push(json!({
            "name": h.name,
            "route": format!("/hooks/{}", h.name),
            "mode": h.mode,
            "signature": h.signature,
            "deliver": h.deliver,
            "last": last,
        }));
    }
    Ok(Json(json!({ "hooks": out })))
}
