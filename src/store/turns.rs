//! Turns: a model turn's start and its commit. The commit lands the turn's messages, its reply
//! chunks, the inbox mark and the session's context state in one lease-checked transaction,
//! which is what keeps a reply from being lost or sent twice across crashes.
//!
//! It must not decide what a turn says or when one runs (`lanes`, `agent`).
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. One impl for
//! both backends ([`super::Pools`]); the bodies run inside a caller's transaction
//! ([`begin_in`], [`commit_in`]) so that several turns can share one.

use async_trait::async_trait;

use super::approvals::KEPT_BY;
use super::context::context_write;
use super::db::{self, Dialect, Tx};
use super::text::{clean, clean_opt};
use super::tx::{check_session_write, insert_inbox, insert_messages, insert_outbox};
use super::types::{ContextAfterCommit, InboxAttempt, Lease, TurnCommit, TurnCommitted, TurnRow};
use super::{Pools, StoreResult};
use crate::domain::{LaneKey, Role, SessionId};

#[async_trait]
pub trait TurnStore: Send + Sync {
    /// Records the start of a turn (lease-checked) and returns its id. The inbox row's attempt
    /// count becomes at least `inbox.attempt` (a retry of the same start stores the same
    /// number). A turn of the same lease still `running` (a retry after the store refused its
    /// commit) is closed as `abandoned` in the same transaction; a dead holder's rows are left
    /// as they are.
    async fn turn_begin(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        inbox: Option<InboxAttempt>,
    ) -> StoreResult<i64> {
        self.turn_begin_with(lease, session_id, inbox, true).await
    }
    /// [`turn_begin`](TurnStore::turn_begin), closing this lease's turns still `running` only
    /// when `sweep` is set: a worker whose every earlier turn under the lease committed knows
    /// none is open, and saves the statement on every turn but a retry.
    async fn turn_begin_with(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        inbox: Option<InboxAttempt>,
        sweep: bool,
    ) -> StoreResult<i64>;
    /// Lands the turn's messages, its reply chunks and the inbox mark in one transaction.
    async fn turn_commit(&self, lease: &Lease, commit: &TurnCommit) -> StoreResult<TurnCommitted> {
        self.turn_commit_with(lease, commit, &|_| None).await
    }
    /// [`turn_commit`](TurnStore::turn_commit), plus the session's context state, computed from
    /// the committed message ids (`None`: unchanged) and written in the same transaction.
    async fn turn_commit_with(
        &self,
        lease: &Lease,
        commit: &TurnCommit,
        context: &ContextAfterCommit<'_>,
    ) -> StoreResult<TurnCommitted>;
    async fn turns(&self, lane: &LaneKey, limit: i64) -> StoreResult<Vec<TurnRow>>;
}

/// A turn's start after its lease check, in one call: the inbox row's attempt bump and the
/// turn row. SQLite runs the statements of one SQL text in one call (`$n` naming the same
/// argument in each); Postgres runs a data-modifying `WITH` as one statement.
pub(super) const BEGIN_SQLITE: &str =
    "UPDATE inbox SET attempts = $1 WHERE id = $2 AND attempts < $1; \
     INSERT INTO turns (lane, session_id, inbox_id, holder, token, started_at) \
     VALUES ($3, $4, $2, $5, $6, $7) RETURNING id";
pub(super) const BEGIN_POSTGRES: &str = "WITH bump AS (UPDATE inbox SET attempts = $1 \
     WHERE id = $2 AND attempts < $1) \
     INSERT INTO turns (lane, session_id, inbox_id, holder, token, started_at) \
     VALUES ($3, $4, $2, $5, $6, $7) RETURNING id";

/// The end of a plain turn's commit in one call: the inbox mark, the kept results' cleanup
/// and the turn row (the three statements of `turn_end`, same arguments).
pub(super) const COMMIT_SQLITE: &str = "UPDATE inbox SET status = $1, note = $2, session_id = $3, \
     reply_message_id = $4, done_at = $5 WHERE id = $6; \
     DELETE FROM approvals WHERE lane = $7 AND inbox_id = $6 AND decided_by = $8; \
     UPDATE turns SET status = $1, ended_at = $5, fresh_input = $9, output = $10, \
     cache_read = $11, cache_write = $12, cost = $13 WHERE id = $14";
pub(super) const COMMIT_POSTGRES: &str = "WITH mark AS (UPDATE inbox SET status = $1, note = $2, \
     session_id = $3, reply_message_id = $4, done_at = $5 WHERE id = $6), \
     kept AS (DELETE FROM approvals WHERE lane = $7 AND inbox_id = $6 AND decided_by = $8) \
     UPDATE turns SET status = $1, ended_at = $5, fresh_input = $9, output = $10, \
     cache_read = $11, cache_write = $12, cost = $13 WHERE id = $14";

#[async_trait]
impl<S: Pools> TurnStore for S {
    async fn turn_begin_with(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        inbox: Option<InboxAttempt>,
        sweep: bool,
    ) -> StoreResult<i64> {
        let mut tx = self.begin().await?;
        let id = begin_in(&mut tx, self.now_ms(), lease, session_id, inbox, sweep).await?;
        tx.commit().await?;
        Ok(id)
    }

    async fn turn_commit_with(
        &self,
        lease: &Lease,
        c: &TurnCommit,
        context: &ContextAfterCommit<'_>,
    ) -> StoreResult<TurnCommitted> {
        let mut tx = self.begin().await?;
        let committed = commit_in(&mut tx, self.now_ms(), lease, c, context).await?;
        tx.commit().await?;
        Ok(committed)
    }

    async fn turns(&self, lane: &LaneKey, limit: i64) -> StoreResult<Vec<TurnRow>> {
        db::query(
            "SELECT id, lane, session_id, inbox_id, holder, token, status, started_at, ended_at, \
             fresh_input, output, cache_read, cache_write, cost FROM turns WHERE lane = $1 ORDER BY id LIMIT $2",
        )
        .bind(lane.as_str())
        .bind(limit)
        .fetch_all(self.reader())
        .await
    }
}

/// [`TurnStore::turn_begin_with`] inside the caller's transaction, which it neither begins nor
/// commits: the lease check, the sweep of this lease's open turns, the inbox bump and the
/// turn row.
pub(super) async fn begin_in(
    tx: &mut Tx,
    now: i64,
    lease: &Lease,
    session_id: &SessionId,
    inbox: Option<InboxAttempt>,
    sweep: bool,
) -> StoreResult<i64> {
    check_session_write(tx, lease, session_id).await?;
    // An earlier turn under this very lease that is still `running` can only be an attempt
    // whose commit the store refused (the worker retries after a store error): it is over, and
    // left open it would read as a turn that never finished.
    if sweep {
        db::query(
            "UPDATE turns SET status = 'abandoned', ended_at = $1 \
             WHERE lane = $2 AND holder = $3 AND token = $4 AND ended_at IS NULL",
        )
        .bind(now)
        .bind(&lease.name)
        .bind(&lease.holder)
        .bind(lease.token)
        .execute(&mut *tx)
        .await?;
    }
    if let Some(a) = inbox {
        let begin = match tx.dialect() {
            Dialect::Sqlite => BEGIN_SQLITE,
            Dialect::Postgres => BEGIN_POSTGRES,
        };
        let (id,): (i64,) = db::query(begin)
            .bind(a.attempt)
            .bind(a.id)
            .bind(&lease.name)
            .bind(session_id)
            .bind(&lease.holder)
            .bind(lease.token)
            .bind(now)
            .fetch_one(&mut *tx)
            .await?;
        return Ok(id);
    }
    let (id,): (i64,) = db::query(
        "INSERT INTO turns (lane, session_id, holder, token, started_at) \
         VALUES ($1, $2, $3, $4, $5) RETURNING id",
    )
    .bind(&lease.name)
    .bind(session_id)
    .bind(&lease.holder)
    .bind(lease.token)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    Ok(id)
}

/// [`TurnStore::turn_commit_with`] inside the caller's transaction, which it neither begins
/// nor commits.
pub(super) async fn commit_in(
    tx: &mut Tx,
    now: i64,
    lease: &Lease,
    c: &TurnCommit,
    context: &ContextAfterCommit<'_>,
) -> StoreResult<TurnCommitted> {
    check_session_write(tx, lease, &c.session_id).await?;
    let ids = insert_messages(
        tx,
        now,
        &lease.name,
        &c.session_id,
        Some(c.turn_id),
        &c.messages,
    )
    .await?;
    if let Some(row) = context(&ids) {
        context_write(tx, &c.session_id, &row).await?;
    }
    for o in &c.outbox {
        insert_outbox(tx, now, o).await?;
    }
    let reply_id = c
        .messages
        .iter()
        .zip(&ids)
        .rev()
        .find(|(m, _)| m.role == Role::Assistant)
        .map(|(_, id)| *id);
    match c.inbox_id {
        Some(inbox_id) if c.steered.is_empty() => {
            let commit = match tx.dialect() {
                Dialect::Sqlite => COMMIT_SQLITE,
                Dialect::Postgres => COMMIT_POSTGRES,
            };
            db::query(commit)
                .bind(c.inbox_status.as_str())
                .bind(clean_opt(c.note.as_deref()))
                .bind(&c.session_id)
                .bind(reply_id)
                .bind(now)
                .bind(inbox_id)
                .bind(&lease.name)
                .bind(KEPT_BY)
                .bind(c.billed.fresh_input)
                .bind(c.billed.output)
                .bind(c.billed.cache_read)
                .bind(c.billed.cache_write)
                .bind(c.cost)
                .bind(c.turn_id)
                .execute(&mut *tx)
                .await?;
        }
        _ => turn_end(tx, lease, c, reply_id, now).await?,
    }
    if let Some(reason) = &c.close_session {
        db::query(
            "UPDATE sessions SET ended_at = $1, end_reason = $2 WHERE id = $3 AND ended_at IS NULL",
        )
        .bind(now)
        .bind(clean(reason))
        .bind(&c.session_id)
        .execute(&mut *tx)
        .await?;
    }
    for ev in &c.enqueue {
        insert_inbox(tx, now, ev).await?;
    }
    Ok(TurnCommitted { message_ids: ids })
}

/// The general end of a turn's commit: each inbox row's mark, the kept results' cleanup and
/// the turn row, one statement each.
async fn turn_end(
    tx: &mut Tx,
    lease: &Lease,
    c: &TurnCommit,
    reply_id: Option<i64>,
    now: i64,
) -> StoreResult<()> {
    if let Some(inbox_id) = c.inbox_id {
        for id in std::iter::once(inbox_id).chain(c.steered.iter().copied()) {
            // A correction is the lane's own pending row: one another turn already answered
            // is left as it is.
            db::query(
                "UPDATE inbox SET status = $1, note = $2, session_id = $3, reply_message_id = $4, \
                 done_at = $5 WHERE id = $6 AND (id = $7 OR (lane = $8 AND status = 'pending'))",
            )
            .bind(c.inbox_status.as_str())
            .bind(clean_opt(c.note.as_deref()))
            .bind(&c.session_id)
            .bind(reply_id)
            .bind(now)
            .bind(id)
            .bind(inbox_id)
            .bind(&lease.name)
            .execute(&mut *tx)
            .await?;
        }
        // Results kept for a retry of this turn (`ApprovalStore::tool_result_keep`) are in the
        // transcript now; approved calls keep their record.
        db::query("DELETE FROM approvals WHERE lane = $1 AND inbox_id = $2 AND decided_by = $3")
            .bind(&lease.name)
            .bind(inbox_id)
            .bind(KEPT_BY)
            .execute(&mut *tx)
            .await?;
    }
    db::query(
        "UPDATE turns SET status = $1, ended_at = $2, fresh_input = $3, output = $4, \
         cache_read = $5, cache_write = $6, cost = $7 WHERE id = $8",
    )
    .bind(c.inbox_status.as_str())
    .bind(now)
    .bind(c.billed.fresh_input)
    .bind(c.billed.output)
    .bind(c.billed.cache_read)
    .bind(c.billed.cache_write)
    .bind(c.cost)
    .bind(c.turn_id)
    .execute(&mut *tx)
    .await?;
    Ok(())
}
