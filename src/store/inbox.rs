//! The inbox: every inbound event, written once per (platform, platform message id) before
//! anything acts on it, and the per-lane views of what is still pending.
//!
//! A turn closes its event inside the turn's own commit (`turns.rs`); only an event that never
//! becomes a turn is closed here.
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. One impl for
//! both backends ([`super::Pools`], statements through `db.rs`).

use async_trait::async_trait;

use super::common::{self, InboxRaw};
use super::db;
use super::text::{clean, clean_json};
use super::tx::insert_outbox;
use super::types::{InboxInsert, InboxRow, LaneOverview, NewOutbox};
use super::{Pools, StoreResult};
use crate::domain::{LaneKey, MessageEvent};

#[async_trait]
pub trait InboxStore: Send + Sync {
    /// Writes the event once per (platform, platform message id).
    async fn inbox_insert(&self, ev: &MessageEvent) -> StoreResult<InboxInsert>;
    async fn inbox_get(&self, id: i64) -> StoreResult<Option<InboxRow>>;
    /// Pending events of one lane, oldest first.
    async fn inbox_pending(&self, lane: &LaneKey, limit: i64) -> StoreResult<Vec<InboxRow>>;
    /// Lanes with pending events (work left over from a crash, or from another replica).
    async fn inbox_pending_lanes(&self, limit: i64) -> StoreResult<Vec<LaneKey>>;
    /// Counts a turn attempt, returning the new count (poison-message guard).
    async fn inbox_bump_attempts(&self, id: i64) -> StoreResult<i64>;
    /// Closes an event that never becomes a turn (a hook skipped it), with optional replies.
    async fn inbox_skip(&self, id: i64, note: &str, replies: &[NewOutbox]) -> StoreResult<()>;
    /// Marks an event `failed` after its last allowed attempt, with optional replies (the
    /// person hears that it was set aside); like a skip, it never becomes a turn.
    async fn inbox_give_up(&self, id: i64, note: &str, replies: &[NewOutbox]) -> StoreResult<()>;
    async fn lanes_overview(&self, limit: i64) -> StoreResult<Vec<LaneOverview>>;
    /// The row's public id: the one it already has, else `candidate` (stored now). Ids that
    /// leave the process (API responses) are these, never the row id.
    async fn inbox_public_id(&self, id: i64, candidate: &str) -> StoreResult<String>;
    /// The row a public id names.
    async fn inbox_by_public_id(&self, public_id: &str) -> StoreResult<Option<i64>>;
}

#[async_trait]
impl<S: Pools> InboxStore for S {
    async fn inbox_insert(&self, ev: &MessageEvent) -> StoreResult<InboxInsert> {
        let json = clean_json(serde_json::to_string(ev)?);
        let inserted: Option<(i64,)> = db::query(
            "INSERT INTO inbox (platform, platform_message_id, lane, event, received_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (platform, lane, platform_message_id) DO NOTHING \
             RETURNING id",
        )
        .bind(ev.platform.as_str())
        .bind(&ev.platform_message_id)
        .bind(ev.lane().as_str())
        .bind(&json)
        .bind(self.now_ms())
        .fetch_optional(self.writer())
        .await?;
        if let Some((id,)) = inserted {
            return Ok(InboxInsert::Inserted(id));
        }
        let (id,): (i64,) = db::query(
            "SELECT id FROM inbox WHERE platform = $1 AND lane = $2 AND platform_message_id = $3",
        )
        .bind(ev.platform.as_str())
        .bind(ev.lane().as_str())
        .bind(&ev.platform_message_id)
        .fetch_one(self.writer())
        .await?;
        Ok(InboxInsert::Duplicate(id))
    }

    async fn inbox_get(&self, id: i64) -> StoreResult<Option<InboxRow>> {
        let sql = format!("SELECT {} FROM inbox WHERE id = $1", common::INBOX_COLS);
        let row: Option<InboxRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.reader())
            .await?;
        row.map(InboxRaw::typed).transpose()
    }

    async fn inbox_pending(&self, lane: &LaneKey, limit: i64) -> StoreResult<Vec<InboxRow>> {
        let sql = format!(
            "SELECT {} FROM inbox WHERE lane = $1 AND status = 'pending' ORDER BY id LIMIT CAST($2 AS BIGINT)",
            common::INBOX_COLS
        );
        let rows: Vec<InboxRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(lane.as_str())
            .bind(limit)
            .fetch_all(self.reader())
            .await?;
        rows.into_iter().map(InboxRaw::typed).collect()
    }

    async fn inbox_pending_lanes(&self, limit: i64) -> StoreResult<Vec<LaneKey>> {
        let rows: Vec<(String,)> = db::query(
            "SELECT lane FROM inbox WHERE status = 'pending' GROUP BY lane ORDER BY MIN(id) LIMIT CAST($1 AS BIGINT)",
        )
        .bind(limit)
        .fetch_all(self.reader())
        .await?;
        Ok(rows.into_iter().map(|(l,)| LaneKey::parse(&l)).collect())
    }

    async fn inbox_bump_attempts(&self, id: i64) -> StoreResult<i64> {
        let (n,): (i64,) =
            db::query("UPDATE inbox SET attempts = attempts + 1 WHERE id = $1 RETURNING attempts")
                .bind(id)
                .fetch_one(self.writer())
                .await?;
        Ok(n)
    }

    async fn inbox_skip(&self, id: i64, note: &str, replies: &[NewOutbox]) -> StoreResult<()> {
        inbox_close(self, "skipped", id, note, replies).await
    }

    async fn inbox_give_up(&self, id: i64, note: &str, replies: &[NewOutbox]) -> StoreResult<()> {
        inbox_close(self, "failed", id, note, replies).await
    }

    async fn inbox_public_id(&self, id: i64, candidate: &str) -> StoreResult<String> {
        let (public,): (String,) = db::query(
            "UPDATE inbox SET public_id = COALESCE(public_id, $2) WHERE id = $1 RETURNING public_id",
        )
        .bind(id)
        .bind(candidate)
        .fetch_one(self.writer())
        .await?;
        Ok(public)
    }

    async fn inbox_by_public_id(&self, public_id: &str) -> StoreResult<Option<i64>> {
        let row: Option<(i64,)> = db::query("SELECT id FROM inbox WHERE public_id = $1")
            .bind(public_id)
            .fetch_optional(self.reader())
            .await?;
        Ok(row.map(|(id,)| id))
    }

    async fn lanes_overview(&self, limit: i64) -> StoreResult<Vec<LaneOverview>> {
        db::query(
            "SELECT i.lane AS lane, \
               CAST(SUM(CASE WHEN i.status = 'pending' THEN 1 ELSE 0 END) AS BIGINT) AS pending, \
               MAX(i.received_at) AS last_activity, \
               (SELECT l.holder FROM leases l WHERE l.name = i.lane AND l.expires_at > $1) AS lease_holder, \
               (SELECT l.expires_at FROM leases l WHERE l.name = i.lane AND l.expires_at > $1) AS lease_expires_at, \
               (SELECT s.id FROM sessions s WHERE s.lane = i.lane AND s.ended_at IS NULL) AS session_id \
             FROM inbox i GROUP BY i.lane ORDER BY MAX(i.received_at) DESC LIMIT CAST($2 AS BIGINT)",
        )
        .bind(self.now_ms())
        .bind(limit)
        .fetch_all(self.reader())
        .await
    }
}

/// Closes an event that never became a turn, with `status`, and queues its replies.
async fn inbox_close<S: Pools>(
    store: &S,
    status: &str,
    id: i64,
    note: &str,
    replies: &[NewOutbox],
) -> StoreResult<()> {
    let mut tx = store.begin().await?;
    db::query("UPDATE inbox SET status = $1, note = $2, done_at = $3 WHERE id = $4")
        .bind(status)
        .bind(clean(note))
        .bind(store.now_ms())
        .bind(id)
        .execute(&mut tx)
        .await?;
    for r in replies {
        insert_outbox(&mut tx, store.now_ms(), r).await?;
    }
    tx.commit().await
}
