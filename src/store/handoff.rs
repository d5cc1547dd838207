//! Durable state of handoff capsules: every build's outcome, the one pending marker per lane,
//! and the per-lane build claim.
//!
//! A separate trait (a supertrait of [`super::Store`]) so the capsule tables stay out of the
//! core store's method list. One impl for both backends ([`super::Pools`], statements through
//! `db.rs`), like the core store's files (`inbox.rs`, …). Two rules live here,
//! not in callers: storing a capsule and replacing the lane's marker happen in one transaction,
//! and a marker is taken by exactly one session (a single `DELETE … RETURNING`), never by the
//! session it summarizes. Nothing here decides what a capsule says.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use super::db;
use super::text::clean;
use super::{Pools, StoreError, StoreResult};
use crate::domain::{BuildStatus, LaneKey, SessionId};

/// A build outcome to store. `created_at` is epoch milliseconds, passed in so that callers
/// (and tests) own the clock.
#[derive(Debug, Clone)]
pub struct NewCapsule {
    pub lane: LaneKey,
    pub session_id: SessionId,
    pub status: BuildStatus,
    /// Empty when the build stored no capsule.
    pub text: String,
    pub message_count: i64,
    pub confidential: bool,
    pub created_at: i64,
    /// The agent whose next session in the lane receives it (`crate::agent::roster`).
    pub agent: String,
}

/// A stored build outcome; `pending` is true while the lane's marker points at it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapsuleRow {
    pub id: i64,
    pub lane: LaneKey,
    pub session_id: SessionId,
    pub status: BuildStatus,
    pub text: String,
    pub message_count: i64,
    pub confidential: bool,
    pub created_at: i64,
    pub pending: bool,
    pub agent: String,
}

/// What [`HandoffStore::pending_consume`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingTake {
    /// The capsule this session receives, now unmarked.
    pub capsule: Option<CapsuleRow>,
    /// Markers deleted unread because they were older than the maximum age.
    pub expired: u64,
}

#[async_trait]
pub trait HandoffStore: Send + Sync {
    /// Claims the lane's build slot for `ttl`. False: a build holds it (here or on another
    /// replica) and has not expired.
    async fn handoff_claim(&self, lane: &LaneKey, holder: &str, ttl: Duration)
        -> StoreResult<bool>;
    /// Frees the slot if `holder` still has it.
    async fn handoff_release(&self, lane: &LaneKey, holder: &str) -> StoreResult<()>;
    /// Stores a build outcome and returns its id. With `mark_pending`, in the same
    /// transaction, the pending marker of the lane and the capsule's agent is set to this
    /// capsule (replacing any older one of that agent; another agent's marker stays).
    async fn capsule_put(&self, capsule: &NewCapsule, mark_pending: bool) -> StoreResult<i64>;
    /// Takes the lane's pending capsule for session `session_id`, at time `now` (epoch ms):
    /// a marker older than `max_age` is deleted unread, a marker written from `session_id`
    /// itself stays, any other is deleted and its capsule returned — to one session only. The
    /// session that took it gets it again if it asks again (its first turn was abandoned
    /// before committing); the note is a `kv` row `handoff-delivered:<lane>:<session>`.
    /// Only the marker of `agent` is taken: a capsule made with another agent stays pending
    /// for that agent's next session in the lane.
    async fn pending_consume_for(
        &self,
        lane: &LaneKey,
        agent: &str,
        session_id: &SessionId,
        max_age: Duration,
        now: i64,
    ) -> StoreResult<PendingTake>;
    /// [`HandoffStore::pending_consume_for`] for the default agent.
    async fn pending_consume(
        &self,
        lane: &LaneKey,
        session_id: &SessionId,
        max_age: Duration,
        now: i64,
    ) -> StoreResult<PendingTake> {
        let agent = crate::config::DEFAULT_AGENT;
        self.pending_consume_for(lane, agent, session_id, max_age, now)
            .await
    }
    /// The lane's latest build outcome, whatever its status.
    async fn capsule_latest(&self, lane: &LaneKey) -> StoreResult<Option<CapsuleRow>>;
    /// The lane's latest stored capsule text (`ok` or `degraded`), of any agent.
    async fn capsule_latest_written(&self, lane: &LaneKey) -> StoreResult<Option<CapsuleRow>> {
        self.capsule_latest_written_for(lane, None).await
    }
    /// The lane's latest stored capsule text, only of `agent` when given: the writer builds
    /// on the previous capsule of the same agent, never another agent's.
    async fn capsule_latest_written_for(
        &self,
        lane: &LaneKey,
        agent: Option<&str>,
    ) -> StoreResult<Option<CapsuleRow>>;
}

pub(super) const CAPSULE_SELECT: &str =
    "SELECT c.id, c.lane, c.session_id, c.status, c.text, c.message_count, c.confidential, \
     c.created_at, p.capsule_id AS pending_id, c.agent \
     FROM capsules c LEFT JOIN handoff_pending p ON p.capsule_id = c.id";

pub(super) const HANDOFF_CLAIM: &str =
    "INSERT INTO handoff_builds (lane, holder, started_at, expires_at) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (lane) DO UPDATE SET holder = excluded.holder, \
     started_at = excluded.started_at, expires_at = excluded.expires_at \
     WHERE handoff_builds.expires_at < $3 RETURNING lane";

pub(super) const PENDING_UPSERT: &str =
    "INSERT INTO handoff_pending (lane, capsule_id, source_session_id, created_at, agent) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (lane, agent) DO UPDATE SET \
     capsule_id = excluded.capsule_id, source_session_id = excluded.source_session_id, \
     created_at = excluded.created_at";

pub(super) type CapsuleTuple = (
    i64,
    String,
    SessionId,
    String,
    String,
    i64,
    i64,
    i64,
    Option<i64>,
    String,
);

pub(super) fn capsule_from(t: CapsuleTuple) -> StoreResult<CapsuleRow> {
    let (
        id,
        lane,
        session_id,
        status,
        text,
        message_count,
        confidential,
        created_at,
        pending,
        agent,
    ) = t;
    let status = BuildStatus::parse(&status)
        .ok_or_else(|| StoreError::other(format!("unknown status {status:?} in capsules")))?;
    Ok(CapsuleRow {
        id,
        lane: LaneKey::parse(&lane),
        session_id,
        status,
        text,
        message_count,
        confidential: confidential != 0,
        created_at,
        pending: pending.is_some(),
        agent,
    })
}

#[async_trait]
impl<S: Pools> HandoffStore for S {
    async fn handoff_claim(
        &self,
        lane: &LaneKey,
        holder: &str,
        ttl: Duration,
    ) -> StoreResult<bool> {
        let now = self.now_ms();
        let row: Option<(String,)> = db::query(HANDOFF_CLAIM)
            .bind(lane.as_str())
            .bind(holder)
            .bind(now)
            .bind(now + ttl.as_millis() as i64)
            .fetch_optional(self.writer())
            .await?;
        Ok(row.is_some())
    }

    async fn handoff_release(&self, lane: &LaneKey, holder: &str) -> StoreResult<()> {
        db::query("DELETE FROM handoff_builds WHERE lane = $1 AND holder = $2")
            .bind(lane.as_str())
            .bind(holder)
            .execute(self.writer())
            .await?;
        Ok(())
    }

    async fn capsule_put(&self, c: &NewCapsule, mark_pending: bool) -> StoreResult<i64> {
        let mut tx = self.begin().await?;
        let (id,): (i64,) = db::query(
            "INSERT INTO capsules (lane, session_id, status, text, message_count, \
                     confidential, created_at, agent) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
                     RETURNING id",
        )
        .bind(c.lane.as_str())
        .bind(&c.session_id)
        .bind(c.status.as_str())
        .bind(clean(&c.text))
        .bind(c.message_count)
        .bind(i64::from(c.confidential))
        .bind(c.created_at)
        .bind(&c.agent)
        .fetch_one(&mut tx)
        .await?;
        if mark_pending {
            db::query(PENDING_UPSERT)
                .bind(c.lane.as_str())
                .bind(id)
                .bind(&c.session_id)
                .bind(c.created_at)
                .bind(&c.agent)
                .execute(&mut tx)
                .await?;
        }
        tx.commit().await?;
        Ok(id)
    }

    async fn pending_consume_for(
        &self,
        lane: &LaneKey,
        agent: &str,
        session_id: &SessionId,
        max_age: Duration,
        now: i64,
    ) -> StoreResult<PendingTake> {
        let oldest = now - max_age.as_millis() as i64;
        let mut tx = self.begin().await?;
        let expired = db::query("DELETE FROM handoff_pending WHERE lane = $1 AND created_at < $2")
            .bind(lane.as_str())
            .bind(oldest)
            .execute(&mut tx)
            .await?;
        // A session that was handed a capsule gets the same one again: only a first
        // turn asks, and a first turn asks twice only when the first attempt never
        // committed (killed, lease lost), so the capsule is not lost with it.
        let key = format!("handoff-delivered:{}:{session_id}", lane.as_str());
        let given: Option<(String,)> = db::query("SELECT value FROM kv WHERE key = $1")
            .bind(&key)
            .fetch_optional(&mut tx)
            .await?;
        let taken: Option<(i64,)> = match given.and_then(|(v,)| v.parse().ok()) {
            Some(id) => Some((id,)),
            None => {
                let taken: Option<(i64,)> = db::query(
                    "DELETE FROM handoff_pending WHERE lane = $1 AND source_session_id <> $2 \
                             AND created_at >= $3 AND agent = $4 RETURNING capsule_id",
                )
                .bind(lane.as_str())
                .bind(session_id)
                .bind(oldest)
                .bind(agent)
                .fetch_optional(&mut tx)
                .await?;
                if let Some((id,)) = taken {
                    db::query(
                        "INSERT INTO kv (key, value, updated_at) VALUES ($1, $2, $3) \
                                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, \
                                 updated_at = excluded.updated_at",
                    )
                    .bind(&key)
                    .bind(id.to_string())
                    .bind(now)
                    .execute(&mut tx)
                    .await?;
                }
                taken
            }
        };
        let capsule = match taken {
            Some((id,)) => {
                let sql = format!("{} WHERE c.id = $1", CAPSULE_SELECT);
                let row: Option<CapsuleTuple> = db::query(sqlx::AssertSqlSafe(sql))
                    .bind(id)
                    .fetch_optional(&mut tx)
                    .await?;
                row.map(capsule_from).transpose()?
            }
            None => None,
        };
        tx.commit().await?;
        Ok(PendingTake { capsule, expired })
    }

    async fn capsule_latest(&self, lane: &LaneKey) -> StoreResult<Option<CapsuleRow>> {
        let sql = format!(
            "{} WHERE c.lane = $1 ORDER BY c.id DESC LIMIT 1",
            CAPSULE_SELECT
        );
        let row: Option<CapsuleTuple> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(lane.as_str())
            .fetch_optional(self.writer())
            .await?;
        row.map(capsule_from).transpose()
    }

    async fn capsule_latest_written_for(
        &self,
        lane: &LaneKey,
        agent: Option<&str>,
    ) -> StoreResult<Option<CapsuleRow>> {
        let sql = format!(
            "{} WHERE c.lane = $1 AND c.status IN ('ok', 'degraded') \
                     AND (CAST($2 AS TEXT) IS NULL OR c.agent = $2) ORDER BY c.id DESC LIMIT 1",
            CAPSULE_SELECT
        );
        let row: Option<CapsuleTuple> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(lane.as_str())
            .bind(agent)
            .fetch_optional(self.writer())
            .await?;
        row.map(capsule_from).transpose()
    }
}
