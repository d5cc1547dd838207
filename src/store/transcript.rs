//! Sessions and their transcripts: opening and closing a lane's session, appending,
//! compacting and retracting messages, and reading them back.
//!
//! Every write checks the caller's lease inside its own transaction, and only the lease of the
//! session's lane may write into it. Nothing is deleted. Full-text search differs per dialect
//! and stays on [`super::Store`].
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. One impl for
//! both backends ([`super::Pools`], statements through `db.rs`).

use async_trait::async_trait;

use super::common::{self, MessageRaw};
use super::db::{self, Tx};
use super::text::clean;
use super::tx::{check_lease, check_session_write, insert_each, set_flags};
use super::types::{Lease, NewMessage, Session, SessionId, StoredMessage};
use super::{Pools, StoreResult};
use crate::domain::LaneKey;

#[async_trait]
pub trait TranscriptStore: Send + Sync {
    async fn session_current(&self, lane: &LaneKey) -> StoreResult<Option<Session>>;
    async fn session_get(&self, id: &SessionId) -> StoreResult<Option<Session>>;
    async fn sessions_list(&self, lane: Option<&LaneKey>, limit: i64) -> StoreResult<Vec<Session>>;
    /// Sessions whose id starts with `prefix` (an operator types the 12 characters the admin
    /// page shows), at most `limit`, by id.
    async fn sessions_with_prefix(&self, prefix: &str, limit: i64) -> StoreResult<Vec<Session>>;
    /// Opens a new session in the lane (lease-checked); fails if one is open.
    async fn session_create(&self, lease: &Lease, session: &Session) -> StoreResult<()>;
    /// Ends the lane's open session (lease-checked).
    async fn session_close(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        reason: &str,
    ) -> StoreResult<()>;
    async fn messages(
        &self,
        session_id: &SessionId,
        live_only: bool,
    ) -> StoreResult<Vec<StoredMessage>>;
    async fn append_messages(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        messages: &[NewMessage],
    ) -> StoreResult<Vec<i64>>;
    /// Compaction, in one lease-checked transaction: flips the live rows `flip_ids` of the
    /// session to compacted (active 0, compacted 1) and appends `insert` as new live rows,
    /// returning their ids. Nothing is deleted. A flip id that is not a live row of the session
    /// aborts the whole compaction with `NotFound` (the caller's view of the transcript is stale).
    async fn compact(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        flip_ids: &[i64],
        insert: &[NewMessage],
    ) -> StoreResult<Vec<i64>>;
    /// Retracts live rows (active 0, compacted 0), lease-checked: the model no longer sees
    /// them and search never finds them. Same `NotFound` rule as [`TranscriptStore::compact`].
    async fn messages_retract(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        ids: &[i64],
    ) -> StoreResult<()>;
    /// Messages of a session around one id (the scroll half of session_search), only when the
    /// session belongs to `lane`: another lane's session reads as empty, like a missing one.
    async fn messages_around(
        &self,
        lane: &LaneKey,
        session_id: &SessionId,
        around_id: i64,
        radius: i64,
    ) -> StoreResult<Vec<StoredMessage>>;
}

#[async_trait]
impl<S: Pools> TranscriptStore for S {
    async fn session_current(&self, lane: &LaneKey) -> StoreResult<Option<Session>> {
        let sql = format!(
            "SELECT {} FROM sessions WHERE lane = $1 AND ended_at IS NULL",
            common::SESSION_COLS
        );
        Ok(db::query(sqlx::AssertSqlSafe(sql))
            .bind(lane.as_str())
            .fetch_optional(self.reader())
            .await?)
    }

    async fn session_get(&self, id: &SessionId) -> StoreResult<Option<Session>> {
        let sql = format!(
            "SELECT {} FROM sessions WHERE id = $1",
            common::SESSION_COLS
        );
        Ok(db::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.reader())
            .await?)
    }

    async fn sessions_list(&self, lane: Option<&LaneKey>, limit: i64) -> StoreResult<Vec<Session>> {
        let sql = format!(
                "SELECT {} FROM sessions WHERE ($1 = '' OR lane = $1) ORDER BY started_at DESC LIMIT CAST($2 AS BIGINT)",
                common::SESSION_COLS
            );
        Ok(db::query(sqlx::AssertSqlSafe(sql))
            .bind(lane.map(|l| l.as_str()).unwrap_or(""))
            .bind(limit)
            .fetch_all(self.reader())
            .await?)
    }

    async fn sessions_with_prefix(&self, prefix: &str, limit: i64) -> StoreResult<Vec<Session>> {
        // LIKE with its wildcards escaped; SQLite's LIKE ignores ASCII case, hence the
        // exact check after.
        let pattern = format!(
            "{}%",
            prefix
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let sql = format!(
            "SELECT {} FROM sessions WHERE id LIKE $1 ESCAPE '\\' ORDER BY id LIMIT CAST($2 AS BIGINT)",
            common::SESSION_COLS
        );
        let rows: Vec<Session> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(pattern)
            .bind(limit)
            .fetch_all(self.reader())
            .await?;
        Ok(rows
            .into_iter()
            .filter(|s| s.id.starts_with(prefix))
            .collect())
    }

    async fn session_create(&self, lease: &Lease, s: &Session) -> StoreResult<()> {
        if s.lane.as_str() != lease.name {
            return Err(common::wrong_lane(&s.id, s.lane.as_str(), lease));
        }
        let mut tx = self.begin().await?;
        check_lease(&mut tx, lease).await?;
        db::query(
            "INSERT INTO sessions (id, lane, parent_id, started_at, system_prompt, model, agent) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&s.id)
        .bind(s.lane.as_str())
        .bind(&s.parent_id)
        .bind(s.started_at)
        .bind(clean(&s.system_prompt))
        .bind(clean(&s.model))
        .bind(clean(&s.agent))
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn session_close(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        reason: &str,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        check_session_write(&mut tx, lease, session_id).await?;
        db::query(
            "UPDATE sessions SET ended_at = $1, end_reason = $2 WHERE id = $3 AND ended_at IS NULL",
        )
        .bind(self.now_ms())
        .bind(clean(reason))
        .bind(session_id)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn messages(
        &self,
        session_id: &SessionId,
        live_only: bool,
    ) -> StoreResult<Vec<StoredMessage>> {
        let sql = format!(
            "SELECT {} FROM messages WHERE session_id = $1 AND ($2 = 0 OR active = 1) ORDER BY id",
            common::MESSAGE_COLS
        );
        let rows: Vec<MessageRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(session_id)
            .bind(live_only as i64)
            .fetch_all(self.reader())
            .await?;
        rows.into_iter().map(MessageRaw::typed).collect()
    }

    async fn append_messages(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        messages: &[NewMessage],
    ) -> StoreResult<Vec<i64>> {
        let mut tx = self.begin().await?;
        check_session_write(&mut tx, lease, session_id).await?;
        let ids = insert_each(&mut tx, self.now_ms(), &lease.name, session_id, messages).await?;
        tx.commit().await?;
        Ok(ids)
    }

    async fn compact(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        flip_ids: &[i64],
        insert: &[NewMessage],
    ) -> StoreResult<Vec<i64>> {
        let mut tx = self.begin().await?;
        let ids = compact_in(&mut tx, self.now_ms(), lease, session_id, flip_ids, insert).await?;
        tx.commit().await?;
        Ok(ids)
    }

    async fn messages_retract(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        ids: &[i64],
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        check_session_write(&mut tx, lease, session_id).await?;
        set_flags(&mut tx, session_id, ids, 0).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn messages_around(
        &self,
        lane: &LaneKey,
        session_id: &SessionId,
        around_id: i64,
        radius: i64,
    ) -> StoreResult<Vec<StoredMessage>> {
        // The lane is checked on the session row, the owner of record, not on each message.
        let sql = format!(
            "SELECT {cols} FROM (SELECT {cols} FROM messages WHERE session_id = $1 AND id <= $2 \
                   AND NOT (active = 0 AND compacted = 0) ORDER BY id DESC LIMIT CAST($3 AS BIGINT)) a \
                 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = $1 AND lane = $5) \
                 UNION ALL \
                 SELECT {cols} FROM (SELECT {cols} FROM messages WHERE session_id = $1 AND id > $2 \
                   AND NOT (active = 0 AND compacted = 0) ORDER BY id LIMIT CAST($4 AS BIGINT)) b \
                 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = $1 AND lane = $5) \
                 ORDER BY id",
            cols = common::MESSAGE_COLS
        );
        let rows: Vec<MessageRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(session_id)
            .bind(around_id)
            .bind(radius + 1)
            .bind(radius)
            .bind(lane.as_str())
            .fetch_all(self.reader())
            .await?;
        rows.into_iter().map(MessageRaw::typed).collect()
    }
}

/// A compaction inside the caller's transaction (lease-checked): the rows it replaces leave the
/// model's view, still searchable, and its carriers land. Returns the carriers' ids.
pub(super) async fn compact_in(
    tx: &mut Tx,
    now: i64,
    lease: &Lease,
    session_id: &SessionId,
    flip_ids: &[i64],
    insert: &[NewMessage],
) -> StoreResult<Vec<i64>> {
    check_session_write(tx, lease, session_id).await?;
    set_flags(tx, session_id, flip_ids, 1).await?;
    insert_each(tx, now, &lease.name, session_id, insert).await
}
