//! Store side of the nightly handoff closer: which conversations are due for a capsule, where a
//! lane's chat is (to close its session through its inbox), and the per-night build budget.
//!
//! The guard rails are SQL here, in one text for both backends, so that a capped `LIMIT`
//! never fills up with rows a later filter would drop. The budget is an atomic upsert on the
//! `kv` table: however many passes (a restart mid-pass, a second replica whose role lease
//! expired) draw from one night, the count never passes the cap. What a capsule says and when
//! a pass runs is `crate::handoff::nightly`'s work, not this module's. Ordinary generic code over
//! `sqlx::Database`: one impl for every backend that names its pools ([`super::Pools`]).

use super::db;
use async_trait::async_trait;
use serde::Serialize;

use super::{Pools, StoreResult};
use crate::domain::{LaneKey, MessageEvent, SessionId};

/// The guard rails of one pass, as absolute bounds (epoch ms) so the caller owns the clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateQuery {
    /// At least this many live user/assistant messages with text (tool traffic aside).
    pub min_messages: i64,
    /// The session's last message is at or after this instant (active recently enough)…
    pub active_since: i64,
    /// …and at or before this one (idle long enough).
    pub idle_before: i64,
    pub limit: i64,
}

/// An open session the closer may summarize.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NightlyCandidate {
    pub lane: String,
    pub session_id: SessionId,
    /// Live user/assistant messages with text.
    pub messages: i64,
    /// Epoch ms of the session's newest message, whatever its role.
    pub last_at: i64,
}

#[async_trait]
pub trait NightlyStore: Send + Sync {
    /// Open sessions due for a nightly capsule, longest idle first: enough dialogue, last
    /// message inside `[active_since, idle_before]`, no written (`ok`/`degraded`) capsule of
    /// that session yet, no event waiting in the lane's inbox, never a `cron:` lane.
    async fn nightly_candidates(&self, q: &CandidateQuery) -> StoreResult<Vec<NightlyCandidate>>;
    /// The lane's newest inbox event (any status): the chat a lane key stands for.
    async fn lane_last_event(&self, lane: &LaneKey) -> StoreResult<Option<MessageEvent>>;
    /// Takes one build from the budget kept under `key`: the new count, or `None` when `cap`
    /// builds were already taken. Atomic across connections and replicas.
    async fn nightly_reserve(&self, key: &str, cap: i64, now: i64) -> StoreResult<Option<i64>>;
}

/// Counted per message so `COUNT` (BIGINT on both backends) only sees the dialogue the writer
/// would read; `MAX(created_at)` sees every message, tool traffic included.
pub(super) const DIALOGUE: &str =
    "COUNT(CASE WHEN m.active = 1 AND m.role IN ('user', 'assistant') \
     AND m.tool_calls IS NULL AND TRIM(m.content) <> '' THEN 1 END)";

pub(super) fn candidates_sql() -> String {
    format!(
        "SELECT s.lane, s.id, {DIALOGUE} AS dialogue, MAX(m.created_at) AS last_at \
         FROM sessions s JOIN messages m ON m.session_id = s.id \
         WHERE s.ended_at IS NULL AND substr(s.lane, 1, 5) <> 'cron:' \
           AND NOT EXISTS (SELECT 1 FROM capsules c WHERE c.lane = s.lane \
             AND c.session_id = s.id AND c.status IN ('ok', 'degraded')) \
           AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.lane = s.lane AND i.status = 'pending') \
         GROUP BY s.lane, s.id \
         HAVING {DIALOGUE} >= $1 AND MAX(m.created_at) >= $2 AND MAX(m.created_at) <= $3 \
         ORDER BY last_at, s.id LIMIT CAST($4 AS BIGINT)"
    )
}

pub(super) const RESERVE: &str = "INSERT INTO kv (key, value, updated_at) VALUES ($1, '1', $3) \
     ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(kv.value AS BIGINT) + 1 AS TEXT), \
     updated_at = excluded.updated_at WHERE CAST(kv.value AS BIGINT) < $2 RETURNING value";

#[async_trait]
impl<S: Pools> NightlyStore for S {
    async fn nightly_candidates(&self, q: &CandidateQuery) -> StoreResult<Vec<NightlyCandidate>> {
        let rows: Vec<(String, String, i64, i64)> =
            db::query(sqlx::AssertSqlSafe(candidates_sql()))
                .bind(q.min_messages)
                .bind(q.active_since)
                .bind(q.idle_before)
                .bind(q.limit)
                .fetch_all(self.writer())
                .await?;
        Ok(rows
            .into_iter()
            .map(|(lane, session_id, messages, last_at)| NightlyCandidate {
                lane,
                session_id: session_id.into(),
                messages,
                last_at,
            })
            .collect())
    }

    async fn lane_last_event(&self, lane: &LaneKey) -> StoreResult<Option<MessageEvent>> {
        let row: Option<(String,)> =
            db::query("SELECT event FROM inbox WHERE lane = $1 ORDER BY id DESC LIMIT 1")
                .bind(lane.as_str())
                .fetch_optional(self.writer())
                .await?;
        match row {
            Some((json,)) => Ok(Some(serde_json::from_str(&json)?)),
            None => Ok(None),
        }
    }

    async fn nightly_reserve(&self, key: &str, cap: i64, now: i64) -> StoreResult<Option<i64>> {
        if cap < 1 {
            return Ok(None);
        }
        let row: Option<(String,)> = db::query(RESERVE)
            .bind(key)
            .bind(cap)
            .bind(now)
            .fetch_optional(self.writer())
            .await?;
        Ok(row.and_then(|(v,)| v.parse().ok()))
    }
}
