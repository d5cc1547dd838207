//! The operator's view: a JSON API under `/api/v1/admin/…` and the admin page at `/admin`.
//!
//! It answers "what is Herald doing, and why did this chat go quiet" from the store, so it
//! shows the same truth on every replica. It only reads: nothing here changes a lane, a
//! session or the outbox (the page's one write, approving a pairing code, goes through the
//! pairing API). The API sits behind the same guard as the rest of `/api` (`access.rs`): that
//! token already reads any lane's transcript, so a separate admin token would not narrow who
//! can see conversations. The page itself holds no data and is served without the token; its
//! script sends the token the operator types.

use std::collections::HashSet;

use axum::extract::{Path, Query, State};
use axum::http::{header, Method};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{row, ApiError, Guard, HttpState, RouteRow};
use crate::domain::cron::parse_schedule;
use crate::domain::{LaneKey, SessionId};
use crate::store::{now_ms, StoreError};

/// The admin JSON routes, all behind the API guard.
pub(super) fn api_rows() -> Vec<RouteRow> {
    let api = |path, handler| row(Method::GET, path, Guard::Api, handler);
    vec![
        api("/api/v1/admin/overview", get(overview)),
        api("/api/v1/admin/lanes", get(lanes)),
        api("/api/v1/admin/lanes/{lane}/turns", get(lane_turns)),
        api("/api/v1/admin/sessions", get(sessions)),
        api(
            "/api/v1/admin/sessions/{id}/messages",
            get(session_messages),
        ),
        api("/api/v1/admin/outbox", get(outbox)),
        api("/api/v1/admin/dead", get(dead)),
        api("/api/v1/admin/capsules", get(capsules)),
        api("/api/v1/admin/cron", get(cron)),
        api("/api/v1/admin/spend", get(super::admin_spend::spend)),
        api("/api/v1/admin/hooks", get(super::admin_hooks::hooks)),
        api("/api/v1/admin/config", get(super::admin_reload::status)),
        row(
            Method::POST,
            "/api/v1/admin/reload",
            Guard::Api,
            axum::routing::post(super::admin_reload::reload),
        ),
    ]
}

pub(super) async fn page() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        include_str!("admin.html"),
    )
}

#[derive(Deserialize)]
pub(super) struct Limit {
    limit: Option<i64>,
    lane: Option<String>,
    /// Include compacted and retracted messages.
    #[serde(default)]
    all: bool,
}

impl Limit {
    fn get(&self, default: i64) -> i64 {
        self.limit.unwrap_or(default).clamp(1, 1000)
    }
}

fn store_error(e: StoreError) -> ApiError {
    ApiError::unavailable(format!("the store could not answer: {e}"))
}

/// What the admin API answers: JSON, or an [`ApiError`].
type Answer = Result<Json<serde_json::Value>, ApiError>;

/// One lane as the operator sees it.
#[derive(Serialize)]
struct LaneView {
    lane: String,
    /// `active` while a worker (on any replica) holds the lane's lease, else `idle`.
    state: &'static str,
    /// A turn is running on this replica right now.
    busy_here: bool,
    lease_holder: Option<String>,
    lease_expires_at: Option<i64>,
    /// Inbound events not yet answered (including the one a running turn works on).
    queue: i64,
    last_activity: i64,
    session_id: Option<SessionId>,
}

async fn lane_views(state: &HttpState, limit: i64) -> Result<Vec<LaneView>, StoreError> {
    let busy: HashSet<String> = state
        .lanes
        .busy_lanes()
        .into_iter()
        .map(|l| l.as_str().to_string())
        .collect();
    let rows = state.store.lanes_overview(limit).await?;
    Ok(rows
        .into_iter()
        .map(|l| LaneView {
            state: if l.lease_holder.is_some() {
                "active"
            } else {
                "idle"
            },
            busy_here: busy.contains(l.lane.as_str()),
            lease_holder: l.lease_holder,
            lease_expires_at: l.lease_expires_at,
            queue: l.pending,
            last_activity: l.last_activity,
            session_id: l.session_id,
            lane: l.lane.to_string(),
        })
        .collect())
}

async fn lanes(State(state): State<HttpState>, Query(q): Query<Limit>) -> Answer {
    let lanes = lane_views(&state, q.get(200)).await.map_err(store_error)?;
    Ok(Json(json!({ "lanes": lanes })))
}

/// Everything the page's first screen needs, in one call.
async fn overview(State(state): State<HttpState>) -> Answer {
    let lanes = lane_views(&state, 200).await.map_err(store_error)?;
    let outbox = state.store.outbox_counts().await.map_err(store_error)?;
    Ok(Json(json!({
        "replica": state.replica_id,
        "store": state.store.backend(),
        "model": state.model,
        "config": state.reload.status(),
        "now": now_ms(),
        "lanes": lanes,
        "outbox": outbox,
    })))
}

async fn lane_turns(
    State(state): State<HttpState>,
    Path(lane): Path<String>,
    Query(q): Query<Limit>,
) -> Answer {
    let store = &state.store;
    let turns = store
        .turns(&LaneKey::parse(&lane), q.get(50))
        .await
        .map_err(store_error)?;
    Ok(Json(json!({ "lane": lane, "turns": turns })))
}

/// A session without its (long) system prompt.
#[derive(Serialize)]
struct SessionView {
    id: SessionId,
    lane: String,
    parent_id: Option<SessionId>,
    started_at: i64,
    ended_at: Option<i64>,
    end_reason: Option<String>,
    model: String,
    /// The agent the session ran as.
    agent: String,
}

async fn sessions(State(state): State<HttpState>, Query(q): Query<Limit>) -> Answer {
    let lane = q.lane.as_deref().map(LaneKey::parse);
    let store = &state.store;
    let list: Vec<SessionView> = store
        .sessions_list(lane.as_ref(), q.get(100))
        .await
        .map_err(store_error)?
        .into_iter()
        .map(|s| SessionView {
            id: s.id,
            lane: s.lane.to_string(),
            parent_id: s.parent_id,
            started_at: s.started_at,
            ended_at: s.ended_at,
            end_reason: s.end_reason,
            model: s.model,
            agent: s.agent,
        })
        .collect();
    Ok(Json(json!({ "sessions": list })))
}

async fn session_messages(
    State(state): State<HttpState>,
    Path(id): Path<SessionId>,
    Query(q): Query<Limit>,
) -> Answer {
    let store = &state.store;
    let session = store
        .session_get(&id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::not_found(format!("no session {id}")))?;
    let messages = store.messages(&id, !q.all).await.map_err(store_error)?;
    Ok(Json(json!({
        "session": {
            "id": session.id,
            "lane": session.lane,
            "started_at": session.started_at,
            "ended_at": session.ended_at,
            "end_reason": session.end_reason,
            "model": session.model,
        },
        "messages": messages,
    })))
}

async fn outbox(State(state): State<HttpState>, Query(q): Query<Limit>) -> Answer {
    let store = &state.store;
    let counts = store.outbox_counts().await.map_err(store_error)?;
    let recent = store.outbox_recent(q.get(50)).await.map_err(store_error)?;
    Ok(Json(json!({ "counts": counts, "recent": recent })))
}

/// Dead letters: inbound messages given up after `inbox.max_attempts` starts, with why and the
/// start of their text, and outbox rows given up for good (`herald inbox dead` prints the same).
async fn dead(State(state): State<HttpState>, Query(q): Query<Limit>) -> Answer {
    let store = &state.store;
    let inbox: Vec<_> = store
        .inbox_dead(q.get(50))
        .await
        .map_err(store_error)?
        .into_iter()
        .map(|d| {
            json!({
                "id": d.row.id,
                "lane": d.row.lane,
                "dead_at": d.dead_at,
                "attempts": d.row.attempts,
                "reason": d.reason(),
                "preview": d.preview(80),
            })
        })
        .collect();
    let outbox = store.outbox_failed(q.get(50)).await.map_err(store_error)?;
    Ok(Json(json!({ "inbox": inbox, "outbox": outbox })))
}

/// The latest handoff build of each recent lane. `status` is its own field (`ok`, `degraded`,
/// …) so that a fallback capsule is visible without opening it; the text is left out.
async fn capsules(State(state): State<HttpState>, Query(q): Query<Limit>) -> Answer {
    let store = &state.store;
    let lanes = store
        .lanes_overview(q.get(200))
        .await
        .map_err(store_error)?;
    let mut out = Vec::new();
    for l in lanes {
        match store.capsule_latest(&l.lane).await {
            Ok(Some(c)) => out.push(json!({
                "lane": c.lane,
                "status": c.status,
                "session_id": c.session_id,
                "created_at": c.created_at,
                "message_count": c.message_count,
                "confidential": c.confidential,
                "pending": c.pending,
                "chars": c.text.chars().count(),
            })),
            Ok(None) => {}
            Err(e) => return Err(store_error(e)),
        }
    }
    Ok(Json(json!({ "capsules": out })))
}

/// Each cron job with its last fire (time, status) and its next scheduled time.
async fn cron(State(state): State<HttpState>) -> Answer {
    let store = &state.store;
    let jobs = store.cron_jobs().await.map_err(store_error)?;
    let now = chrono::Utc::now();
    let mut out = Vec::new();
    for j in jobs {
        let last = store
            .cron_fires(Some(&j.name), 1)
            .await
            .map_err(store_error)?
            .into_iter()
            .next();
        let anchor = chrono::DateTime::from_timestamp_millis(j.anchor_at).unwrap_or(now);
        let next = (!j.paused)
            .then(|| parse_schedule(&j.spec.schedule, j.spec.timezone.as_deref()).ok())
            .flatten()
            .and_then(|s| s.next_after(now, anchor))
            .map(|t| t.timestamp_millis());
        out.push(json!({
            "name": j.name,
            "schedule": j.spec.schedule,
            "paused": j.paused,
            "deliver": j.spec.deliver,
            "last_fire_at": last.as_ref().map(|f| f.scheduled_at),
            "last_status": last.as_ref().map(|f| f.status),
            "next_fire_at": next,
        }));
    }
    Ok(Json(json!({ "jobs": out })))
}
