//! The spend ledger: one row per model call, held at its worst case before the call and settled
//! to its bill after; the sums that caps are checked against; the grants that raise a cap for
//! one period; the marks that send an approver one notice per cap and period.
//!
//! A reservation checks every cap and writes its row in one transaction that first updates the
//! single `budget_lock` row, so two replicas racing one cap take turns and neither can spend
//! what the other has just reserved. It must not decide prices or which caps apply
//! (`crate::budget`). Amounts are billionths of the configured currency.
//!
//! A supertrait of [`super::Store`]; ordinary generic code over [`super::Pools`].

use super::db;
use async_trait::async_trait;

use super::{Pools, StoreResult};
use crate::domain::{Cap, Payer};

/// Which spending a cap sums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpendScope {
    /// Everything of one day (`YYYY-MM-DD` in the budget's timezone).
    Day(String),
    /// Everything of one month (`YYYY-MM`).
    Month(String),
    /// One person's spending of one day.
    PersonDay { person: String, day: String },
    /// One run (a cron fire's inbox key).
    Run(String),
    /// One agent's spending of one day.
    AgentDay { agent: String, day: String },
    /// One person's spending with one agent in one day.
    AgentPersonDay {
        agent: String,
        person: String,
        day: String,
    },
}

impl SpendScope {
    /// The SQL condition (binds from `$2` on) and its values.
    fn filter(&self) -> (&'static str, Vec<&str>) {
        match self {
            SpendScope::Day(d) => ("day = $2", vec![d]),
            SpendScope::Month(m) => ("month = $2", vec![m]),
            SpendScope::PersonDay { person, day } => {
                ("person = $2 AND day = $3", vec![person, day])
            }
            SpendScope::Run(r) => ("run = $2", vec![r]),
            SpendScope::AgentDay { agent, day } => ("agent = $2 AND day = $3", vec![agent, day]),
            SpendScope::AgentPersonDay { agent, person, day } => (
                "agent = $2 AND person = $3 AND day = $4",
                vec![agent, person, day],
            ),
        }
    }
}

/// A cap to check before a reservation: what it sums, its limit, and the name and period its
/// grants are filed under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapLimit {
    /// Filed in the store under its key (`daily`, `person_daily:<person>`, …).
    pub cap: Cap,
    pub period: String,
    pub scope: SpendScope,
    pub limit: i64,
}

/// A cap as a reservation found it: what it allows (grants included) and what was already
/// spent or held under it. The cap a refused reservation would have passed, or the standing of
/// each cap a reservation passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapHit {
    pub cap: Cap,
    pub period: String,
    /// The cap's own amount, before grants (what one extension adds).
    pub base: i64,
    /// What it allows now: its own amount plus the period's grants.
    pub limit: i64,
    pub spent: i64,
}

/// A reservation that passed: its hold's id and where each of its caps stood before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reserved {
    pub id: i64,
    pub caps: Vec<CapHit>,
}

/// A model call about to be made, and whose spending it is.
#[derive(Debug, Clone)]
pub struct NewHold {
    pub lane: String,
    /// The agent whose turn (or child) made the call.
    pub agent: String,
    /// Who pays: written as the `payer` column and, for a person, the `person` column.
    pub payer: Payer,
    pub job: Option<String>,
    pub run: Option<String>,
    /// `turn`, `capsule`, `child`.
    pub cause: String,
    pub model: String,
    pub day: String,
    pub month: String,
    /// The call's worst case.
    pub held: i64,
    /// After this (epoch ms) an unsettled hold no longer counts: its holder died mid-call.
    pub expires_at: i64,
}

/// A settled (or still held) row of the ledger, for reports.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SpendRow {
    pub at: i64,
    pub day: String,
    pub lane: String,
    /// The agent that made the call (`default` on rows written before agents were recorded).
    pub agent: String,
    pub person: Option<String>,
    /// `person` or `system`; `None` on rows written before payers were recorded.
    pub payer: Option<String>,
    pub job: Option<String>,
    pub cause: String,
    pub model: String,
    pub state: String,
    pub held: i64,
    /// `None`: a bucket without a rate was billed (the row counts at its hold).
    pub cost: Option<i64>,
    pub fresh_input: i64,
    pub output: i64,
    pub cache_read: i64,
    pub cache_write: i64,
}

impl SpendRow {
    /// Who paid; `None` for a row written before payers were recorded.
    pub fn payer(&self) -> Option<Payer> {
        Payer::from_columns(self.payer.as_deref(), self.person.as_deref())
    }

    /// What the row counts for under a cap.
    pub fn counted(&self) -> i64 {
        match self.state.as_str() {
            "settled" => self.cost.unwrap_or(self.held),
            "held" => self.held,
            _ => 0,
        }
    }
}

/// The four billed buckets of a call (or a turn's calls), in tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, sqlx::FromRow)]
pub struct Billed {
    pub fresh_input: i64,
    pub output: i64,
    pub cache_read: i64,
    pub cache_write: i64,
}

#[async_trait]
pub trait SpendStore: Send + Sync {
    /// Checks `caps` and, when none would be passed by `hold.held`, writes the hold and returns
    /// it with each cap's standing; otherwise the first cap it would pass.
    async fn spend_reserve(
        &self,
        hold: &NewHold,
        caps: &[CapLimit],
    ) -> StoreResult<Result<Reserved, CapHit>>;
    /// The call was billed: `cost` (`None`: unknown) and its tokens.
    async fn spend_settle(&self, id: i64, cost: Option<i64>, billed: Billed) -> StoreResult<()>;
    /// A call that no cap applied to, written once it was billed (no hold first).
    async fn spend_record(
        &self,
        row: &NewHold,
        cost: Option<i64>,
        billed: Billed,
    ) -> StoreResult<()>;
    /// The call failed: its hold no longer counts.
    async fn spend_release(&self, id: i64) -> StoreResult<()>;
    /// Spent or held under `scope` now.
    async fn spend_sum(&self, scope: &SpendScope) -> StoreResult<i64>;
    /// Grants of `cap` for `period`, summed.
    async fn spend_granted(&self, cap: &Cap, period: &str) -> StoreResult<i64>;
    /// Raises `cap` by `amount` for `period`.
    async fn spend_grant(&self, cap: &Cap, period: &str, amount: i64, by: &str) -> StoreResult<()>;
    /// Ledger rows from `since` (epoch ms), oldest first.
    async fn spend_rows(&self, since: i64) -> StoreResult<Vec<SpendRow>>;
    /// Marks a notice of `kind` about `cap` in `period`; `false` when it was already sent.
    async fn budget_notice_once(&self, cap: &Cap, period: &str, kind: &str) -> StoreResult<bool>;
}

/// What `cap` was raised by for `period`.
const GRANTED: &str = "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) FROM budget_grants \
     WHERE cap = $1 AND period = $2";

/// What counts under a cap: settled rows at their cost (at their hold when the cost is
/// unknown) and live holds; `$1` is now, the scope's condition follows.
const COUNTED: &str = "CAST(COALESCE(SUM(CASE WHEN state = 'held' THEN held \
     ELSE COALESCE(cost, held) END), 0) AS BIGINT) FROM spend \
     WHERE (state = 'settled' OR (state = 'held' AND expires_at > $1)) AND ";

#[async_trait]
impl<S: Pools> SpendStore for S {
    async fn spend_reserve(
        &self,
        hold: &NewHold,
        caps: &[CapLimit],
    ) -> StoreResult<Result<Reserved, CapHit>> {
        let now = self.now_ms();
        let mut standing = Vec::with_capacity(caps.len());
        let mut tx = self.begin().await?;
        db::query("UPDATE budget_lock SET n = n + 1 WHERE id = 1")
            .execute(&mut tx)
            .await?;
        for cap in caps {
            let (filter, binds) = cap.scope.filter();
            let sql = format!("SELECT {COUNTED}{filter}");
            let mut q = db::query(sqlx::AssertSqlSafe(sql)).bind(now);
            for b in binds {
                q = q.bind(b);
            }
            let (spent,) = q.fetch_one(&mut tx).await?;
            let key = cap.cap.as_key();
            let (granted,): (i64,) = db::query(GRANTED)
                .bind(key.as_str())
                .bind(cap.period.as_str())
                .fetch_one(&mut tx)
                .await?;
            let state = CapHit {
                cap: cap.cap.clone(),
                period: cap.period.clone(),
                base: cap.limit,
                limit: cap.limit.saturating_add(granted),
                spent,
            };
            if spent.saturating_add(hold.held) > state.limit {
                tx.rollback().await?;
                return Ok(Err(state));
            }
            standing.push(state);
        }
        let (id,): (i64,) = db::query(
            "INSERT INTO spend (at, day, month, lane, person, job, run, cause, model, state, \
             held, expires_at, payer, agent) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'held', $10, $11, $12, $13) RETURNING id",
        )
        .bind(now)
        .bind(hold.day.as_str())
        .bind(hold.month.as_str())
        .bind(hold.lane.as_str())
        .bind(hold.payer.person())
        .bind(hold.job.as_deref())
        .bind(hold.run.as_deref())
        .bind(hold.cause.as_str())
        .bind(hold.model.as_str())
        .bind(hold.held)
        .bind(hold.expires_at)
        .bind(hold.payer.kind())
        .bind(hold.agent.as_str())
        .fetch_one(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(Ok(Reserved { id, caps: standing }))
    }

    async fn spend_settle(&self, id: i64, cost: Option<i64>, billed: Billed) -> StoreResult<()> {
        db::query(
            "UPDATE spend SET state = 'settled', cost = $1, fresh_input = $2, output = $3, \
             cache_read = $4, cache_write = $5 WHERE id = $6",
        )
        .bind(cost)
        .bind(billed.fresh_input)
        .bind(billed.output)
        .bind(billed.cache_read)
        .bind(billed.cache_write)
        .bind(id)
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn spend_record(
        &self,
        row: &NewHold,
        cost: Option<i64>,
        billed: Billed,
    ) -> StoreResult<()> {
        db::query(
            "INSERT INTO spend (at, day, month, lane, person, job, run, cause, model, state, \
             held, cost, fresh_input, output, cache_read, cache_write, expires_at, payer, agent) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'settled', 0, $10, $11, $12, $13, $14, 0, \
             $15, $16)",
        )
        .bind(self.now_ms())
        .bind(row.day.as_str())
        .bind(row.month.as_str())
        .bind(row.lane.as_str())
        .bind(row.payer.person())
        .bind(row.job.as_deref())
        .bind(row.run.as_deref())
        .bind(row.cause.as_str())
        .bind(row.model.as_str())
        .bind(cost)
        .bind(billed.fresh_input)
        .bind(billed.output)
        .bind(billed.cache_read)
        .bind(billed.cache_write)
        .bind(row.payer.kind())
        .bind(row.agent.as_str())
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn spend_release(&self, id: i64) -> StoreResult<()> {
        db::query("UPDATE spend SET state = 'released' WHERE id = $1 AND state = 'held'")
            .bind(id)
            .execute(self.writer())
            .await?;
        Ok(())
    }

    async fn spend_sum(&self, scope: &SpendScope) -> StoreResult<i64> {
        let (filter, binds) = scope.filter();
        let sql = format!("SELECT {COUNTED}{filter}");
        let mut q = db::query(sqlx::AssertSqlSafe(sql)).bind(self.now_ms());
        for b in binds {
            q = q.bind(b);
        }
        Ok(q.fetch_one::<(i64,)>(self.reader()).await?.0)
    }

    async fn spend_granted(&self, cap: &Cap, period: &str) -> StoreResult<i64> {
        let key = cap.as_key();
        let (granted,): (i64,) = db::query(GRANTED)
            .bind(key.as_str())
            .bind(period)
            .fetch_one(self.reader())
            .await?;
        Ok(granted)
    }

    async fn spend_grant(&self, cap: &Cap, period: &str, amount: i64, by: &str) -> StoreResult<()> {
        let key = cap.as_key();
        db::query(
            "INSERT INTO budget_grants (cap, period, amount, granted_by, at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(key.as_str())
        .bind(period)
        .bind(amount)
        .bind(by)
        .bind(self.now_ms())
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn spend_rows(&self, since: i64) -> StoreResult<Vec<SpendRow>> {
        Ok(db::query(
            "SELECT at, day, lane, agent, person, payer, job, cause, model, state, held, cost, fresh_input, \
             output, cache_read, cache_write FROM spend WHERE at >= $1 AND state <> 'released' \
             ORDER BY id",
        )
        .bind(since)
        .fetch_all(self.reader())
        .await?)
    }

    async fn budget_notice_once(&self, cap: &Cap, period: &str, kind: &str) -> StoreResult<bool> {
        let key = cap.as_key();
        let res = db::query(
            "INSERT INTO budget_notices (cap, period, kind, at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT DO NOTHING",
        )
        .bind(key.as_str())
        .bind(period)
        .bind(kind)
        .bind(self.now_ms())
        .execute(self.writer())
        .await?;
        Ok(res == 1)
    }
}
