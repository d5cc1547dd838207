//! The inbox: every inbound event, written once per (platform, platform message id) before
//! anything acts on it, and the per-lane views of what is still pending.
//!
//! A turn closes its event inside the turn's own commit (`turns.rs`); only an event that never
//! becomes a turn is closed here.
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. The SQL is
//! written once and expanded for both backends by [`inbox_store_impl`], invoked in `sqlite.rs`
//! and `postgres.rs`, where the pools live
//! and the transaction helpers (`tx.rs`) are imported.

use async_trait::async_trait;

use super::types::{InboxInsert, InboxRow, LaneOverview, NewOutbox};
use super::StoreResult;
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
}

/// Expands `impl InboxStore for $ty`; the type must have `pool`, `reader`, `begin()` and the
/// backend's transaction helpers in scope.
macro_rules! inbox_store_impl {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl super::inbox::InboxStore for $ty {
        async fn inbox_insert(&self, ev: &MessageEvent) -> StoreResult<InboxInsert> {
            let json = super::text::clean_json(serde_json::to_string(ev)?);
            let inserted: Option<(i64,)> = sqlx::query_as(
                "INSERT INTO inbox (platform, platform_message_id, lane, event, received_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (platform, lane, platform_message_id) DO NOTHING \
                 RETURNING id",
            )
            .bind(ev.platform.as_str())
            .bind(&ev.platform_message_id)
            .bind(ev.lane().as_str())
            .bind(&json)
            .bind(self.now_ms())
            .fetch_optional(&self.pool)
            .await?;
            if let Some((id,)) = inserted {
                return Ok(InboxInsert::Inserted(id));
            }
            let (id,): (i64,) = sqlx::query_as(
                "SELECT id FROM inbox WHERE platform = $1 AND lane = $2 AND platform_message_id = $3",
            )
            .bind(ev.platform.as_str())
            .bind(ev.lane().as_str())
            .bind(&ev.platform_message_id)
            .fetch_one(&self.pool)
            .await?;
            Ok(InboxInsert::Duplicate(id))
        }

        async fn inbox_get(&self, id: i64) -> StoreResult<Option<InboxRow>> {
            let sql = format!("SELECT {} FROM inbox WHERE id = $1", common::INBOX_COLS);
            let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(id)
                .fetch_optional(&self.reader)
                .await?;
            row.as_ref().map(common::inbox_from_row).transpose()
        }

        async fn inbox_pending(&self, lane: &LaneKey, limit: i64) -> StoreResult<Vec<InboxRow>> {
            let sql = format!(
                "SELECT {} FROM inbox WHERE lane = $1 AND status = 'pending' ORDER BY id LIMIT $2",
                common::INBOX_COLS
            );
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(lane.as_str())
                .bind(limit)
                .fetch_all(&self.reader)
                .await?;
            rows.iter().map(common::inbox_from_row).collect()
        }

        async fn inbox_pending_lanes(&self, limit: i64) -> StoreResult<Vec<LaneKey>> {
            let rows: Vec<(String,)> = sqlx::query_as(
                "SELECT lane FROM inbox WHERE status = 'pending' GROUP BY lane ORDER BY MIN(id) LIMIT $1",
            )
            .bind(limit)
            .fetch_all(&self.reader)
            .await?;
            Ok(rows.into_iter().map(|(l,)| LaneKey::parse(&l)).collect())
        }

        async fn inbox_bump_attempts(&self, id: i64) -> StoreResult<i64> {
            let (n,): (i64,) = sqlx::query_as(
                "UPDATE inbox SET attempts = attempts + 1 WHERE id = $1 RETURNING attempts",
            )
            .bind(id)
            .fetch_one(&self.pool)
            .await?;
            Ok(n)
        }

        async fn inbox_skip(&self, id: i64, note: &str, replies: &[NewOutbox]) -> StoreResult<()> {
            self.inbox_close("skipped", id, note, replies).await
        }

        async fn inbox_give_up(&self, id: i64, note: &str, replies: &[NewOutbox]) -> StoreResult<()> {
            self.inbox_close("failed", id, note, replies).await
        }

        async fn lanes_overview(&self, limit: i64) -> StoreResult<Vec<LaneOverview>> {
            Ok(sqlx::query_as(
                "SELECT i.lane AS lane, \
                   CAST(SUM(CASE WHEN i.status = 'pending' THEN 1 ELSE 0 END) AS BIGINT) AS pending, \
                   MAX(i.received_at) AS last_activity, \
                   (SELECT l.holder FROM leases l WHERE l.name = i.lane AND l.expires_at > $1) AS lease_holder, \
                   (SELECT l.expires_at FROM leases l WHERE l.name = i.lane AND l.expires_at > $1) AS lease_expires_at, \
                   (SELECT s.id FROM sessions s WHERE s.lane = i.lane AND s.ended_at IS NULL) AS session_id \
                 FROM inbox i GROUP BY i.lane ORDER BY MAX(i.received_at) DESC LIMIT $2",
            )
            .bind(self.now_ms())
            .bind(limit)
            .fetch_all(&self.reader)
            .await?)
        }
        }

        impl $ty {
            /// Closes an event that never became a turn, with `status`, and queues its replies.
            async fn inbox_close(
                &self,
                status: &str,
                id: i64,
                note: &str,
                replies: &[NewOutbox],
            ) -> StoreResult<()> {
                let mut tx = self.begin().await?;
                sqlx::query("UPDATE inbox SET status = $1, note = $2, done_at = $3 WHERE id = $4")
                    .bind(status)
                    .bind(&*super::text::clean(note))
                    .bind(self.now_ms())
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                for r in replies {
                    insert_outbox(&mut tx, self.now_ms(), r).await?;
                }
                tx.commit().await?;
                Ok(())
            }
        }
    };
}

pub(super) use inbox_store_impl;
