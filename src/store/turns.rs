//! Turns: a model turn's start and its commit. The commit lands the turn's messages, its reply
//! chunks, the inbox mark and the session's context state in one lease-checked transaction,
//! which is what keeps a reply from being lost or sent twice across crashes.
//!
//! It must not decide what a turn says or when one runs (`lanes`, `agent`).
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. The SQL is
//! written once and expanded for both backends by [`turn_store_impl`], invoked in `sqlite.rs`
//! and `postgres.rs`, where the pools live
//! and the transaction helpers (`tx.rs`) are imported.

use async_trait::async_trait;

use super::steps::{TurnStep, TurnStepDone};
use super::types::{ContextAfterCommit, InboxAttempt, Lease, TurnCommit, TurnCommitted, TurnRow};
use super::StoreResult;
use crate::domain::{LaneKey, SessionId};

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
    async fn turn_steps(&self, steps: Vec<TurnStep>) -> Vec<StoreResult<TurnStepDone>> {
        super::steps::one_by_one(self, steps).await
    }
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

/// Expands `impl TurnStore for $ty`; the type must have `pool`, `reader`, `begin()` and the
/// backend's transaction and context helpers in scope. `$begin` and `$commit`: the backend's
/// one-call texts ([`BEGIN_SQLITE`], [`COMMIT_SQLITE`] or their Postgres twins).
macro_rules! turn_store_impl {
    ($ty:ty, $begin:expr, $commit:expr) => {
        #[async_trait::async_trait]
        impl super::turns::TurnStore for $ty {
        async fn turn_begin_with(
            &self,
            lease: &Lease,
            session_id: &SessionId,
            inbox: Option<InboxAttempt>,
            sweep: bool,
        ) -> StoreResult<i64> {
            let mut tx = self.begin().await?;
            check_session_write(&mut tx, lease, session_id).await?;
            let id = self.begin_in(&mut tx, lease, session_id, inbox, sweep).await?;
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
            let done = self.commit_in(&mut tx, lease, c, context).await?;
            tx.commit().await?;
            Ok(done)
        }

        async fn turn_steps(&self, steps: Vec<super::steps::TurnStep>) -> Vec<StoreResult<super::steps::TurnStepDone>> {
            use super::steps::{TurnStep, TurnStepDone};
            if steps.len() < 2 {
                return super::steps::one_by_one(self, steps).await;
            }
            let mut tx = match self.begin().await {
                Ok(tx) => tx,
                Err(e) => return super::steps::shared_failure(&e, steps.len()),
            };
            let mut done = Vec::with_capacity(steps.len());
            for step in &steps {
                let (lease, session_id) = step.lease_and_session();
                match check_session_write(&mut tx, lease, session_id).await {
                    Ok(()) => {}
                    Err(e) if super::steps::refused(&e) => {
                        done.push(Err(e));
                        continue;
                    }
                    Err(e) => return self.steps_alone(tx, steps, &e).await,
                }
                let landed = match step {
                    TurnStep::Begin { lease, session_id, inbox, sweep } => self
                        .begin_in(&mut tx, lease, session_id, *inbox, *sweep)
                        .await
                        .map(TurnStepDone::Begun),
                    TurnStep::Commit { lease, commit, context } => self
                        .commit_in(&mut tx, lease, commit, &**context)
                        .await
                        .map(TurnStepDone::Committed),
                };
                match landed {
                    Ok(d) => done.push(Ok(d)),
                    Err(e) => return self.steps_alone(tx, steps, &e).await,
                }
            }
            match tx.commit().await {
                Ok(()) => done,
                // Whether the commit landed is unknown: no step is run again here, each lane's
                // worker retries as after a failed single-lane commit.
                Err(e) => super::steps::shared_failure(&e.into(), steps.len()),
            }
        }

        async fn turns(&self, lane: &LaneKey, limit: i64) -> StoreResult<Vec<TurnRow>> {
            Ok(sqlx::query_as(
                "SELECT id, lane, session_id, inbox_id, holder, token, status, started_at, ended_at, \
                 fresh_input, output, cache_read, cache_write, cost FROM turns WHERE lane = $1 ORDER BY id LIMIT $2",
            )
            .bind(lane.as_str())
            .bind(limit)
            .fetch_all(&self.reader)
            .await?)
        }
        }

        impl $ty {
        /// A group whose shared transaction hit a database error: rolled back, so nothing of it
        /// landed, and each step goes again in its own transaction.
        async fn steps_alone(
            &self,
            tx: sqlx::Transaction<'static, <$ty as super::Pools>::Db>,
            steps: Vec<super::steps::TurnStep>,
            cause: &StoreError,
        ) -> Vec<StoreResult<super::steps::TurnStepDone>> {
            tracing::debug!(error = %cause, steps = steps.len(), "group commit rolled back; landing its steps one by one");
            if let Err(e) = tx.rollback().await {
                tracing::debug!(error = %e, "group commit rollback failed");
            }
            super::steps::one_by_one(self, steps).await
        }

        /// A turn's start inside `tx`, after its lease check.
        async fn begin_in(
            &self,
            tx: &mut sqlx::Transaction<'static, <$ty as super::Pools>::Db>,
            lease: &Lease,
            session_id: &SessionId,
            inbox: Option<InboxAttempt>,
            sweep: bool,
        ) -> StoreResult<i64> {
            // An earlier turn under this very lease that is still `running` can only be an
            // attempt whose commit the store refused (the worker retries after a store error):
            // it is over, and left open it would read as a turn that never finished.
            if sweep {
                sqlx::query(
                    "UPDATE turns SET status = 'abandoned', ended_at = $1 \
                     WHERE lane = $2 AND holder = $3 AND token = $4 AND ended_at IS NULL",
                )
                .bind(self.now_ms())
                .bind(&lease.name)
                .bind(&lease.holder)
                .bind(lease.token)
                .execute(&mut **tx)
                .await?;
            }
            if let Some(a) = inbox {
                let (id,): (i64,) = sqlx::query_as($begin)
                    .bind(a.attempt)
                    .bind(a.id)
                    .bind(&lease.name)
                    .bind(session_id)
                    .bind(&lease.holder)
                    .bind(lease.token)
                    .bind(self.now_ms())
                    .fetch_one(&mut **tx)
                    .await?;
                return Ok(id);
            }
            let (id,): (i64,) = sqlx::query_as(
                "INSERT INTO turns (lane, session_id, holder, token, started_at) \
                 VALUES ($1, $2, $3, $4, $5) RETURNING id",
            )
            .bind(&lease.name)
            .bind(session_id)
            .bind(&lease.holder)
            .bind(lease.token)
            .bind(self.now_ms())
            .fetch_one(&mut **tx)
            .await?;
            Ok(id)
        }

        /// A turn's commit inside `tx`, after its lease check.
        async fn commit_in(
            &self,
            tx: &mut sqlx::Transaction<'static, <$ty as super::Pools>::Db>,
            lease: &Lease,
            c: &TurnCommit,
            context: &ContextAfterCommit<'_>,
        ) -> StoreResult<TurnCommitted> {
            let ids = insert_messages(tx, self.now_ms(), &lease.name, &c.session_id, Some(c.turn_id), &c.messages).await?;
            let written = context(&ids);
            if let Some(row) = &written {
                context_write(tx, &c.session_id, row).await?;
            }
            for o in &c.outbox {
                insert_outbox(tx, self.now_ms(), o).await?;
            }
            let now = self.now_ms();
            let reply_id = c
                .messages
                .iter()
                .zip(&ids)
                .rev()
                .find(|(m, _)| m.role == Role::Assistant)
                .map(|(_, id)| *id);
            match c.inbox_id {
                Some(inbox_id) if c.steered.is_empty() => {
                    sqlx::query($commit)
                        .bind(c.inbox_status.as_str())
                        .bind(super::text::clean_opt(c.note.as_deref()))
                        .bind(&c.session_id)
                        .bind(reply_id)
                        .bind(now)
                        .bind(inbox_id)
                        .bind(&lease.name)
                        .bind(super::approvals::KEPT_BY)
                        .bind(c.billed.fresh_input)
                        .bind(c.billed.output)
                        .bind(c.billed.cache_read)
                        .bind(c.billed.cache_write)
                        .bind(c.cost)
                        .bind(c.turn_id)
                        .execute(&mut **tx)
                        .await?;
                }
                _ => self.turn_end(tx, lease, c, reply_id, now).await?,
            }
            if let Some(reason) = &c.close_session {
                sqlx::query(
                    "UPDATE sessions SET ended_at = $1, end_reason = $2 WHERE id = $3 AND ended_at IS NULL",
                )
                .bind(now)
                .bind(&*super::text::clean(reason))
                .bind(&c.session_id)
                .execute(&mut **tx)
                .await?;
            }
            for ev in &c.enqueue {
                insert_inbox(tx, self.now_ms(), ev).await?;
            }
            Ok(TurnCommitted { message_ids: ids, context: written })
        }

        /// The general end of a turn's commit: each inbox row's mark, the kept results'
        /// cleanup and the turn row, one statement each.
        async fn turn_end(
            &self,
            tx: &mut sqlx::Transaction<'static, <$ty as super::Pools>::Db>,
            lease: &Lease,
            c: &TurnCommit,
            reply_id: Option<i64>,
            now: i64,
        ) -> StoreResult<()> {
            if let Some(inbox_id) = c.inbox_id {
                for id in std::iter::once(inbox_id).chain(c.steered.iter().copied()) {
                    // A correction is the lane's own pending row: one another turn already
                    // answered is left as it is.
                    sqlx::query(
                        "UPDATE inbox SET status = $1, note = $2, session_id = $3, reply_message_id = $4, \
                         done_at = $5 WHERE id = $6 AND (id = $7 OR (lane = $8 AND status = 'pending'))",
                    )
                    .bind(c.inbox_status.as_str())
                    .bind(super::text::clean_opt(c.note.as_deref()))
                    .bind(&c.session_id)
                    .bind(reply_id)
                    .bind(now)
                    .bind(id)
                    .bind(inbox_id)
                    .bind(&lease.name)
                    .execute(&mut **tx)
                    .await?;
                }
                // Results kept for a retry of this turn (`ApprovalStore::tool_result_keep`)
                // are in the transcript now; approved calls keep their record.
                sqlx::query("DELETE FROM approvals WHERE lane = $1 AND inbox_id = $2 AND decided_by = $3")
                    .bind(&lease.name)
                    .bind(inbox_id)
                    .bind(super::approvals::KEPT_BY)
                    .execute(&mut **tx)
                    .await?;
            }
            sqlx::query(
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
                .execute(&mut **tx)
                .await?;
            Ok(())
        }
        }
    };
}

pub(super) use turn_store_impl;
