//! The admin page's spend chart: `GET /api/v1/admin/spend?days=N` answers what each budget day
//! of the last N (default 30, at most 366) cost, every day present (a quiet day is a zero), so
//! the page draws its bars without filling gaps.

use axum::extract::{Query, State};
use axum::Json;
use chrono::{Duration, Utc};
use serde::Deserialize;
use serde_json::json;

use super::{ApiError, HttpState};
use crate::budget::report::{group, since_ms, By};
use crate::domain::Amount;

#[derive(Deserialize)]
pub(super) struct Days {
    days: Option<i64>,
}

pub(super) async fn spend(
    State(state): State<HttpState>,
    Query(q): Query<Days>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let budget = &state.config.budget;
    let tz: chrono_tz::Tz = budget.timezone.parse().unwrap_or(chrono_tz::UTC);
    let days = q.days.unwrap_or(30).clamp(1, 366);
    let now = Utc::now();
    let since = since_ms(&format!("{days}d"), tz, now).unwrap_or(0);
    let rows = state
        .store
        .spend_rows(since)
        .await
        .map_err(|e| ApiError::unavailable(format!("the store could not answer: {e}")))?;
    let groups = group(&rows, By::Day);
    let today = now.with_timezone(&tz).date_naive();
    let out: Vec<_> = (0..days)
        .rev()
        .map(|back| {
            let day = (today - Duration::days(back))
                .format("%Y-%m-%d")
                .to_string();
            let g = groups
                .iter()
                .find(|g| g.key.as_deref() == Some(day.as_str()));
            json!({
                "day": day,
                "cost": g.map_or(Some(Amount(0)), |g| g.cost),
                "known_cost": g.map_or(Amount(0), |g| g.known_cost),
                "unknown_calls": g.map_or(0, |g| g.unknown_calls),
                "calls": g.map_or(0, |g| g.calls),
                "output": g.map_or(0, |g| g.output),
            })
        })
        .collect();
    Ok(Json(json!({
        "currency": budget.currency,
        "timezone": tz.name(),
        "days": out,
    })))
}
