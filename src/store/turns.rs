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
use super::steps::{TurnStep, TurnStepDone};
use super::text::{clean, clean_opt};
use super::tx::{check_session_write, insert_inbox, insert_messages, insert_outbox};
use super::types::{ContextAfterCommit, InboxAttempt, Lease, TurnCommit, TurnCommitted, TurnRow};
use super::{Pools, StoreError, StoreResult};
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
    /// Group commit: the steps of several lanes (turn starts and commits) in one write
    /// transaction, each under its own lease check, the results in the steps' order. A step the
    /// store refuses writes nothing and the others land; a database error before the shared
    /// commit lands each step in a transaction of its own instead. One step: the single-lane
    /// call.
    async fn turn_steps(&self, steps: Vec<TurnStep>) -> Vec<StoreResult<TurnStepDone>>;
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
        check_session_write(&mut tx, lease, session_id).await?;
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
        check_session_write(&mut tx, lease, &c.session_id).await?;
        let committed = commit_in(&mut tx, self.now_ms(), lease, c, context).await?;
        tx.commit().await?;
        Ok(committed)
    }

    async fn turn_steps(&self, steps: Vec<TurnStep>) -> Vec<StoreResult<TurnStepDone>> {
        if steps.len() < 2 {
            return super::steps::one_by_one(self, steps).await;
        }
        let mut tx = match self.begin().await {
            Ok(tx) => tx,
            Err(e) => return super::steps::shared_failure(&e, steps.len()),
        };
        let now = self.now_ms();
        let mut done = Vec::with_capacity(steps.len());
        for step in &steps {
            let (lease, session_id) = step.lease_and_session();
            match check_session_write(&mut tx, lease, session_id).await {
                Ok(()) => {}
                Err(e) if super::steps::refused(&e) => {
                    done.push(Err(e));
                    continue;
                }
                Err(e) => return steps_alone(self, tx, steps, &e).await,
            }
            let landed = match step {
                TurnStep::Begin {
                    lease,
                    session_id,
                    inbox,
                    sweep,
                } => begin_in(&mut tx, now, lease, session_id, *inbox, *sweep)
                    .await
                    .map(TurnStepDone::Begun),
                TurnStep::Commit {
                    lease,
                    commit,
                    context,
                } => commit_in(&mut tx, now, lease, commit, &**context)
                    .await
                    .map(TurnStepDone::Committed),
            };
            match landed {
                Ok(d) => done.push(Ok(d)),
                Err(e) => return steps_alone(self, tx, steps, &e).await,
            }
        }
        match tx.commit().await {
            Ok(()) => done,
            // Whether the commit landed is unknown: no step runs again here; each lane's worker
            // retries as after a failed single-lane commit.
            Err(e) => super::steps::shared_failure(&e, steps.len()),
        }
    }

    async fn turns(&self, lane: &LaneKey, limit: i64) -> StoreResult<Vec<TurnRow>> {
        db::query(
            "SELECT id, lane, session_id, inbox_id, holder, token, status, started_at, ended_at, \
             fresh_input, output, cache_read, cache_write, cost FROM turns WHERE lane = $1 ORDER BY id LIMIT CAST($2 AS BIGINT)",
        )
        .bind(lane.as_str())
        .bind(limit)
        .fetch_all(self.reader())
        .await
    }
}

/// A group whose shared transaction hit a database error: rolled back, so nothing of it landed,
/// and each step goes again in its own transaction.
async fn steps_alone<S: Pools>(
    store: &S,
    tx: Tx,
    steps: Vec<TurnStep>,
    cause: &StoreError,
) -> Vec<StoreResult<TurnStepDone>> {
    tracing::debug!(error = %cause, steps = steps.len(), "group commit rolled back; landing its steps one by one");
    if let Err(e) = tx.rollback().await {
        tracing::debug!(error = %e, "group commit rollback failed");
    }
    super::steps::one_by_one(store, steps).await
}

/// [`TurnStore::turn_begin_with`] inside the caller's transaction, which it neither begins nor
/// commits, after the caller's lease check: the sweep of this lease's open turns, the inbox bump and the
/// turn row.
pub(super) async fn begin_in(
    tx: &mut Tx,
    now: i64,
    lease: &Lease,
    session_id: &SessionId,
    inbox: Option<InboxAttempt>,
    sweep: bool,
) -> StoreResult<i64> {
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
/// nor commits, after the caller's lease check.
pub(super) async fn commit_in(
    tx: &mut Tx,
    now: i64,
    lease: &Lease,
    c: &TurnCommit,
    context: &ContextAfterCommit<'_>,
) -> StoreResult<TurnCommitted> {
    let ids = insert_messages(
        tx,
        now,
        &lease.name,
        &c.session_id,
        Some(c.turn_id),
        &c.messages,
    )
    .await?;
    let written = context(&ids);
    if let Some(row) = &written {
        context_write(tx, &c.session_id, row).await?;
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
    Ok(TurnCommitted {
        message_ids: ids,
        context: written,
    })
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
