//! The inbox: every inbound event, written once per (platform, platform message id) before
//! anything acts on it, and the per-lane views of what is still pending.
//!
//! A turn closes its event inside the turn's own commit (`turns.rs`); only an event that never
//! becomes a turn is closed here.
//!
//! A worker *takes* a row before any work on it (`inbox_take`): one lease-checked statement
//! counts the attempt, so a start that crashes the process is counted too, and a row that
//! crashes every start ends `dead` (`inbox_give_up`) instead of taking its lane down at each
//! restart. `inbox_dead` and `inbox_retry` are the operator's view of those rows.
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. One impl for
//! both backends ([`super::Pools`], statements through `db.rs`).

use async_trait::async_trait;

use super::common::{self, InboxRaw};
use super::db::{self, Dialect};
use super::text::{clean, clean_json};
use super::tx::insert_outbox;
use super::types::{DeadLetter, InboxInsert, InboxRow, LaneOverview, Lease, NewOutbox};
use super::{Pools, StoreError, StoreResult};
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
    /// Takes the pending row `id` of the lease's lane for one start of processing: counts the
    /// attempt durably, in one statement with the lease check, before any work on it. Returns
    /// the new count, or `None` when the row is no longer pending (answered meanwhile);
    /// `LeaseLost` when the lease is not held.
    async fn inbox_take(&self, lease: &Lease, id: i64) -> StoreResult<Option<i64>>;
    /// Closes an event that never becomes a turn (a hook skipped it), with optional replies.
    async fn inbox_skip(&self, id: i64, note: &str, replies: &[NewOutbox]) -> StoreResult<()>;
    /// Dead-letters a pending event whose take found it past its last allowed attempt: marked
    /// `dead` with `note` (the reason) and its attempts without that take, with optional
    /// replies (the person hears that it was set aside), in one transaction; like a skip, it
    /// never becomes a turn. An event no longer pending is left as it is.
    async fn inbox_give_up(&self, id: i64, note: &str, replies: &[NewOutbox]) -> StoreResult<()>;
    /// Dead-lettered events, newest first.
    async fn inbox_dead(&self, limit: i64) -> StoreResult<Vec<DeadLetter>>;
    /// Sends a dead event back: `pending` with no attempt counted. Wakes nothing: a daemon's
    /// rescan finds it. `false` when `id` is not a dead event.
    async fn inbox_retry(&self, id: i64) -> StoreResult<bool>;
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

    async fn inbox_take(&self, lease: &Lease, id: i64) -> StoreResult<Option<i64>> {
        let pool = self.writer();
        let take = match pool.dialect() {
            Dialect::Sqlite => TAKE_SQLITE,
            Dialect::Postgres => TAKE_POSTGRES,
        };
        let taken: Option<(i64,)> = db::query(take)
            .bind(id)
            .bind(&lease.name)
            .bind(&lease.holder)
            .bind(lease.token)
            .fetch_optional(pool)
            .await?;
        if let Some((n,)) = taken {
            return Ok(Some(n));
        }
        // Nothing taken: tell a lost lease from a row that is no longer pending.
        let held: Option<(i64,)> =
            db::query("SELECT token FROM leases WHERE name = $1 AND holder = $2 AND token = $3")
                .bind(&lease.name)
                .bind(&lease.holder)
                .bind(lease.token)
                .fetch_optional(pool)
                .await?;
        match held {
            Some(_) => Ok(None),
            None => Err(StoreError::LeaseLost {
                name: lease.name.clone(),
            }),
        }
    }

    async fn inbox_skip(&self, id: i64, note: &str, replies: &[NewOutbox]) -> StoreResult<()> {
        inbox_close(self, "skipped", id, note, replies).await
    }

    async fn inbox_give_up(&self, id: i64, note: &str, replies: &[NewOutbox]) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        // The take that found the row past its cap started nothing: it is not an attempt.
        db::query(
            "UPDATE inbox SET status = 'dead', note = $1, done_at = $2, \
             attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END \
             WHERE id = $3 AND status = 'pending'",
        )
        .bind(clean(note))
        .bind(self.now_ms())
        .bind(id)
        .execute(&mut tx)
        .await?;
        for r in replies {
            insert_outbox(&mut tx, self.now_ms(), r).await?;
        }
        tx.commit().await
    }

    async fn inbox_dead(&self, limit: i64) -> StoreResult<Vec<DeadLetter>> {
        let sql = format!(
            "SELECT {}, done_at FROM inbox WHERE status = 'dead' ORDER BY id DESC LIMIT CAST($1 AS BIGINT)",
            common::INBOX_COLS
        );
        let rows: Vec<common::DeadRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(limit)
            .fetch_all(self.reader())
            .await?;
        rows.into_iter().map(common::DeadRaw::typed).collect()
    }

    async fn inbox_retry(&self, id: i64) -> StoreResult<bool> {
        let changed = db::query(
            "UPDATE inbox SET status = 'pending', attempts = 0, note = NULL, done_at = NULL \
             WHERE id = $1 AND status = 'dead'",
        )
        .bind(id)
        .execute(self.writer())
        .await?;
        Ok(changed == 1)
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

/// [`InboxStore::inbox_take`] on SQLite: the lease check is part of the statement (SQLite has
/// one writer, so nothing changes the lease between the check and the update).
const TAKE_SQLITE: &str = "UPDATE inbox SET attempts = attempts + 1 \
     WHERE id = $1 AND lane = $2 AND status = 'pending' \
     AND EXISTS (SELECT 1 FROM leases WHERE name = $2 AND holder = $3 AND token = $4) \
     RETURNING attempts";
/// The same on Postgres: the lease check updates the lease row (`common::LEASE_CHECK`), which
/// locks it, so a concurrent takeover waits for this statement.
const TAKE_POSTGRES: &str = "WITH held AS (UPDATE leases SET expires_at = expires_at \
     WHERE name = $2 AND holder = $3 AND token = $4 RETURNING token) \
     UPDATE inbox SET attempts = attempts + 1 \
     WHERE id = $1 AND lane = $2 AND status = 'pending' AND EXISTS (SELECT 1 FROM held) \
     RETURNING attempts";

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
