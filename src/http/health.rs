//! Liveness, readiness and the Prometheus scrape endpoint.
//!
//! Readiness and the scrape ask the store with a short deadline: with the database away, the
//! pool would otherwise keep a probe waiting for its whole acquire timeout (15 s), and the
//! probe's own timeout would hide the reason.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;

use super::HttpState;
use crate::store::StoreError;

pub(super) async fn healthz() -> &'static str {
    "ok"
}

const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// Why the store check has no answer (the probe shows it after "store unreachable: ").
#[derive(Debug, thiserror::Error)]
enum Unreachable {
    #[error("no answer within {STORE_CHECK_TIMEOUT:?}")]
    Timeout,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Asks the store whether it answers and every migration is applied, and records the answer
/// in `herald_store_up`.
async fn store_check(state: &HttpState) -> Result<bool, Unreachable> {
    let answer = match tokio::time::timeout(STORE_CHECK_TIMEOUT, state.store.ready()).await {
        Ok(r) => r.map_err(Unreachable::from),
        Err(_) => Err(Unreachable::Timeout),
    };
    let up = matches!(answer, Ok(true));
    metrics::gauge!("herald_store_up").set(if up { 1.0 } else { 0.0 });
    answer
}

/// Ready when the store answers and every migration is applied.
pub(super) async fn readyz(State(state): State<HttpState>) -> impl IntoResponse {
    match store_check(&state).await {
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
    // With the store away, the store-backed gauges keep their last values rather than make
    // the scrape wait; `herald_store_up` says they are stale.
    if matches!(store_check(&state).await, Ok(true)) {
        store_gauges(&state).await;
    }
    metrics::gauge!("herald_lanes_busy").set(state.lanes.busy_lanes().len() as f64);
    crate::telemetry::alloc_count::publish();
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        state.metrics.render(),
    )
}

/// Gauges read from the store at scrape time (all replicas' rows).
async fn store_gauges(state: &HttpState) {
    if let Ok(c) = state.store.outbox_counts().await {
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
    if let Ok(lanes) = state.store.lanes_overview(1000).await {
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
}
