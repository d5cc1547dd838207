//! Liveness, readiness and the Prometheus scrape endpoint.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;

use super::HttpState;

pub(super) async fn healthz() -> &'static str {
    "ok"
}

/// Ready when the store answers and every migration is applied.
pub(super) async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    match state.router.deps().store.ready().await {
        Ok(true) => (StatusCode::OK, "ready".to_string()),
        Ok(false) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "migrations not applied".to_string(),
        ),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("store unreachable: {e}"),
        ),
    }
}

pub(super) async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    let deps = state.router.deps();
    if let Ok(c) = deps.store.outbox_counts().await {
        for (status, n) in [
            ("pending", c.pending),
            ("sending", c.sending),
            ("sent", c.sent),
            ("failed", c.failed),
        ] {
            metrics::gauge!("herald_outbox_rows", "status" => status).set(n as f64);
        }
    }
    // Queue depth per lane state: a lane is active while some replica holds its lease. The
    // overview is capped so that a scrape stays cheap on a store with many old lanes.
    if let Ok(lanes) = deps.store.lanes_overview(1000).await {
        let mut by_state = [("active", 0i64, 0i64), ("idle", 0, 0)];
        for l in &lanes {
            let s = &mut by_state[usize::from(l.lease_holder.is_none())];
            s.1 += 1;
            s.2 += l.pending;
        }
        for (state, lanes, pending) in by_state {
            metrics::gauge!("herald_lanes", "state" => state).set(lanes as f64);
            metrics::gauge!("herald_lane_queue_depth", "state" => state).set(pending as f64);
        }
    }
    metrics::gauge!("herald_lanes_busy").set(state.router.busy_lanes().len() as f64);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        state.metrics.render(),
    )
}
