//! The cron tables: jobs (from the config file or the CLI) and the fire ledger.
//!
//! The ledger's unique (job, scheduled_at) row is the whole exactly-once mechanism: a claim is
//! an `INSERT … ON CONFLICT DO NOTHING RETURNING`, so of any number of schedulers (threads,
//! processes, replicas on one Postgres) exactly one gets the id back and runs the fire. This
//! module holds SQL only; when to fire and what a run's outcome means is `crate::cron`'s work.
//! The SQL text is shared by both backends (`$N` placeholders, epoch-ms integers): ordinary
//! generic code over `sqlx::Database`, one impl for every backend that names its pools
//! ([`super::Pools`]).

use async_trait::async_trait;
use sqlx::Row;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};

use super::cron_types::*;
use super::{Pools, RowsAffected, StoreError, StoreResult};
use crate::domain::cron::JobSpec;

#[async_trait]
pub trait CronStore: Send + Sync {
    /// Makes the config file's jobs the stored config jobs: same-named config rows are
    /// replaced (keeping their pause flag, and their anchor unless the schedule, time zone or
    /// `enabled` changed), config rows no longer in the file are removed, CLI jobs are left
    /// alone (a config job named like a CLI job is not stored).
    async fn cron_sync_config(&self, jobs: &[JobSpec], now: i64) -> StoreResult<()>;
    /// Adds a CLI job anchored at `now`; `false` when a job of that name exists.
    async fn cron_job_add(&self, spec: &JobSpec, now: i64) -> StoreResult<bool>;
    /// Adds a job created in a conversation, owned by `owner` and made by `person`
    /// (`platform:sender`), anchored at `now`; `false` when a job of that name exists.
    async fn cron_job_add_owned(
        &self,
        spec: &JobSpec,
        owner: &crate::domain::LaneKey,
        person: &str,
        now: i64,
    ) -> StoreResult<bool>;
    async fn cron_job_get(&self, name: &str) -> StoreResult<Option<CronJobRow>>;
    /// Every job, by name.
    async fn cron_jobs(&self) -> StoreResult<Vec<CronJobRow>>;
    /// Removes the job (its ledger stays, as history); `false` when there was none.
    async fn cron_job_remove(&self, name: &str) -> StoreResult<bool>;
    /// Pauses or resumes; resuming a paused job records `resumed_at = now`, so fires that fell
    /// while it was paused never run. `false` when there is no such job.
    async fn cron_job_set_paused(&self, name: &str, paused: bool, now: i64) -> StoreResult<bool>;
    /// Pauses an active job for `reason` (kept until it is resumed or paused by hand);
    /// `false` when it was not active.
    async fn cron_job_pause_because(&self, name: &str, reason: &str, now: i64)
        -> StoreResult<bool>;
    /// The newest scheduled time the ledger accounts for (run or skipped), manual runs aside.
    async fn cron_last_scheduled(&self, job: &str) -> StoreResult<Option<i64>>;
    /// Claims a fire: `Some(id)` for the one caller that inserted the row, `None` for all
    /// others.
    async fn cron_fire_claim(&self, fire: &NewFire) -> StoreResult<Option<i64>>;
    /// Records a scheduled time that will never run; `false` when it was already recorded.
    async fn cron_fire_skip(&self, fire: &NewFire) -> StoreResult<bool>;
    /// Takes over a claim whose holder died before it wrote the run's inbox event (the claim
    /// expired before `now`), counting an attempt. `true` for the one caller that got it.
    async fn cron_fire_reclaim(
        &self,
        id: i64,
        holder: &str,
        claim_until: i64,
        now: i64,
    ) -> StoreResult<bool>;
    /// Links the fire to the inbox event that runs it.
    async fn cron_fire_set_inbox(&self, id: i64, inbox_id: i64) -> StoreResult<()>;
    /// Closes a claimed fire with its outcome; `true` for the one caller that closed it.
    async fn cron_fire_finish(&self, id: i64, outcome: &FireOutcome) -> StoreResult<bool>;
    /// Claimed fires, oldest first.
    async fn cron_fires_open(&self, limit: i64) -> StoreResult<Vec<CronFire>>;
    /// Ledger rows, newest first (by id), of one job or of all.
    async fn cron_fires(&self, job: Option<&str>, limit: i64) -> StoreResult<Vec<CronFire>>;
}

pub(super) const JOB_COLS: &str =
    "name, spec, source, paused, anchor_at, resumed_at, created_at, updated_at, owner_person, \
     paused_reason";
pub(super) const FIRE_COLS: &str =
    "id, job, scheduled_at, manual, status, claimed_by, claim_until, \
     attempts, inbox_id, started_at, ended_at, missed_count, deliveries, note, created_at";

pub(super) const SYNC_UPSERT: &str = "INSERT INTO cron_jobs \
       (name, spec, schedule_key, source, paused, anchor_at, created_at, updated_at) \
     VALUES ($1, $2, $3, 'config', 0, $4, $4, $4) \
     ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, updated_at = excluded.updated_at, \
       anchor_at = CASE WHEN cron_jobs.schedule_key = excluded.schedule_key \
         THEN cron_jobs.anchor_at ELSE excluded.anchor_at END, \
       schedule_key = excluded.schedule_key \
     WHERE cron_jobs.source = 'config' AND cron_jobs.spec <> excluded.spec";

/// A CLI or chat job (`$5` is its source, `$6` the person who made a chat job), anchored at
/// its creation.
const JOB_INSERT: &str = "INSERT INTO cron_jobs \
       (name, spec, schedule_key, source, paused, anchor_at, created_at, updated_at, owner_person) \
     VALUES ($1, $2, $3, $5, 0, $4, $4, $4, $6) ON CONFLICT (name) DO NOTHING";

pub(super) const FIRE_INSERT: &str = "INSERT INTO cron_fires \
       (job, scheduled_at, manual, status, claimed_by, claim_until, attempts, started_at, \
        missed_count, note, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     ON CONFLICT (job, scheduled_at) DO NOTHING RETURNING id";

/// What decides whether a config change moves the schedule's anchor. `enabled` is part of it:
/// a job switched back on starts afresh instead of catching up the time it was off.
pub(super) fn schedule_key(spec: &JobSpec) -> String {
    format!(
        "{}|{}|{}",
        spec.schedule.trim(),
        spec.timezone.as_deref().unwrap_or("").trim(),
        spec.enabled
    )
}

pub(super) fn job_from_row<R: Row>(row: &R) -> Result<CronJobRow, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let spec: String = row.try_get("spec")?;
    let source: String = row.try_get("source")?;
    let paused: i64 = row.try_get("paused")?;
    Ok(CronJobRow {
        name: row.try_get("name")?,
        spec: serde_json::from_str(&spec)?,
        source: JobSource::parse(&source),
        owner: source
            .strip_prefix(CHAT_SOURCE_PREFIX)
            .map(crate::domain::LaneKey::parse),
        paused: paused != 0,
        owner_person: row.try_get("owner_person")?,
        paused_reason: row.try_get("paused_reason")?,
        anchor_at: row.try_get("anchor_at")?,
        resumed_at: row.try_get("resumed_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

pub(super) fn fire_from_row<R: Row>(row: &R) -> Result<CronFire, StoreError>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    String: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let status: String = row.try_get("status")?;
    let manual: i64 = row.try_get("manual")?;
    Ok(CronFire {
        id: row.try_get("id")?,
        job: row.try_get("job")?,
        scheduled_at: row.try_get("scheduled_at")?,
        manual: manual != 0,
        status: FireStatus::parse(&status)
            .ok_or_else(|| StoreError::other(format!("unknown status {status:?} in cron_fires")))?,
        claimed_by: row.try_get("claimed_by")?,
        claim_until: row.try_get("claim_until")?,
        attempts: row.try_get("attempts")?,
        inbox_id: row.try_get("inbox_id")?,
        started_at: row.try_get("started_at")?,
        ended_at: row.try_get("ended_at")?,
        missed_count: row.try_get("missed_count")?,
        deliveries: row.try_get("deliveries")?,
        note: row.try_get("note")?,
        created_at: row.try_get("created_at")?,
    })
}

#[async_trait]
impl<S> CronStore for S
where
    S: Pools,
    for<'c> &'c mut <S::Db as Database>::Connection: Executor<'c, Database = S::Db>,
    <S::Db as Database>::Arguments: IntoArguments<S::Db>,
    for<'q> &'q str: Encode<'q, S::Db> + Type<S::Db>,
    i64: for<'q> Encode<'q, S::Db> + Type<S::Db>,
    String: for<'q> Encode<'q, S::Db> + Type<S::Db> + for<'r> sqlx::Decode<'r, S::Db>,
    i64: for<'r> sqlx::Decode<'r, S::Db>,
    for<'a> &'a str: sqlx::ColumnIndex<<S::Db as Database>::Row>,
    <S::Db as Database>::QueryResult: RowsAffected,
    Option<i64>: for<'q> Encode<'q, S::Db>,
    Option<String>: for<'q> Encode<'q, S::Db>,
    (String,): for<'r> FromRow<'r, <S::Db as Database>::Row>,
    (i64,): for<'r> FromRow<'r, <S::Db as Database>::Row>,
    (Option<i64>,): for<'r> FromRow<'r, <S::Db as Database>::Row>,
{
    async fn cron_sync_config(&self, jobs: &[JobSpec], now: i64) -> StoreResult<()> {
        for spec in jobs {
            sqlx::query(SYNC_UPSERT)
                .bind(&spec.name)
                .bind(super::text::clean_json(serde_json::to_string(spec)?))
                .bind(schedule_key(spec))
                .bind(now)
                .execute(self.writer())
                .await?;
        }
        let stored: Vec<(String,)> =
            sqlx::query_as("SELECT name FROM cron_jobs WHERE source = 'config'")
                .fetch_all(self.writer())
                .await?;
        for (name,) in stored {
            if !jobs.iter().any(|j| j.name == name) {
                sqlx::query("DELETE FROM cron_jobs WHERE name = $1 AND source = 'config'")
                    .bind(&name)
                    .execute(self.writer())
                    .await?;
            }
        }
        Ok(())
    }

    async fn cron_job_add(&self, spec: &JobSpec, now: i64) -> StoreResult<bool> {
        let res = sqlx::query(JOB_INSERT)
            .bind(&spec.name)
            .bind(super::text::clean_json(serde_json::to_string(spec)?))
            .bind(schedule_key(spec))
            .bind(now)
            .bind("cli")
            .bind(None::<String>)
            .execute(self.writer())
            .await?;
        Ok(res.rows_affected() == 1)
    }

    async fn cron_job_add_owned(
        &self,
        spec: &JobSpec,
        owner: &crate::domain::LaneKey,
        person: &str,
        now: i64,
    ) -> StoreResult<bool> {
        let res = sqlx::query(JOB_INSERT)
            .bind(&spec.name)
            .bind(super::text::clean_json(serde_json::to_string(spec)?))
            .bind(schedule_key(spec))
            .bind(now)
            .bind(format!("{CHAT_SOURCE_PREFIX}{owner}"))
            .bind(Some(person.to_string()))
            .execute(self.writer())
            .await?;
        Ok(res.rows_affected() == 1)
    }

    async fn cron_job_get(&self, name: &str) -> StoreResult<Option<CronJobRow>> {
        let sql = format!("SELECT {JOB_COLS} FROM cron_jobs WHERE name = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(name)
            .fetch_optional(self.writer())
            .await?;
        row.as_ref().map(job_from_row).transpose()
    }

    async fn cron_jobs(&self) -> StoreResult<Vec<CronJobRow>> {
        let sql = format!("SELECT {JOB_COLS} FROM cron_jobs ORDER BY name");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.writer())
            .await?;
        rows.iter().map(job_from_row).collect()
    }

    async fn cron_job_remove(&self, name: &str) -> StoreResult<bool> {
        let res = sqlx::query("DELETE FROM cron_jobs WHERE name = $1")
            .bind(name)
            .execute(self.writer())
            .await?;
        Ok(res.rows_affected() == 1)
    }

    async fn cron_job_set_paused(&self, name: &str, paused: bool, now: i64) -> StoreResult<bool> {
        let res = sqlx::query(
            "UPDATE cron_jobs SET paused = $2, updated_at = $3, paused_reason = NULL, \
           resumed_at = CASE WHEN $2 = 0 AND paused <> 0 THEN $3 ELSE resumed_at END \
         WHERE name = $1",
        )
        .bind(name)
        .bind(i64::from(paused))
        .bind(now)
        .execute(self.writer())
        .await?;
        Ok(res.rows_affected() == 1)
    }

    async fn cron_job_pause_because(
        &self,
        name: &str,
        reason: &str,
        now: i64,
    ) -> StoreResult<bool> {
        let res = sqlx::query(
            "UPDATE cron_jobs SET paused = 1, paused_reason = $2, updated_at = $3 \
             WHERE name = $1 AND paused = 0",
        )
        .bind(name)
        .bind(&*super::text::clean(reason))
        .bind(now)
        .execute(self.writer())
        .await?;
        Ok(res.rows_affected() == 1)
    }

    async fn cron_last_scheduled(&self, job: &str) -> StoreResult<Option<i64>> {
        let (last,): (Option<i64>,) = sqlx::query_as(
            "SELECT MAX(scheduled_at) FROM cron_fires WHERE job = $1 AND manual = 0",
        )
        .bind(job)
        .fetch_one(self.writer())
        .await?;
        Ok(last)
    }

    async fn cron_fire_claim(&self, f: &NewFire) -> StoreResult<Option<i64>> {
        let id: Option<(i64,)> = sqlx::query_as(FIRE_INSERT)
            .bind(&f.job)
            .bind(f.scheduled_at)
            .bind(i64::from(f.manual))
            .bind(FireStatus::Claimed.as_str())
            .bind(&f.holder)
            .bind(f.claim_until)
            .bind(1_i64)
            .bind(Some(self.now_ms()))
            .bind(f.missed_count)
            .bind(super::text::clean_opt(f.note.as_deref()))
            .bind(self.now_ms())
            .fetch_optional(self.writer())
            .await?;
        Ok(id.map(|(id,)| id))
    }

    async fn cron_fire_skip(&self, f: &NewFire) -> StoreResult<bool> {
        let id: Option<(i64,)> = sqlx::query_as(FIRE_INSERT)
            .bind(&f.job)
            .bind(f.scheduled_at)
            .bind(i64::from(f.manual))
            .bind(FireStatus::Skipped.as_str())
            .bind(&f.holder)
            .bind(None::<i64>)
            .bind(0_i64)
            .bind(None::<i64>)
            .bind(f.missed_count)
            .bind(super::text::clean_opt(f.note.as_deref()))
            .bind(self.now_ms())
            .fetch_optional(self.writer())
            .await?;
        Ok(id.is_some())
    }

    async fn cron_fire_reclaim(
        &self,
        id: i64,
        holder: &str,
        claim_until: i64,
        now: i64,
    ) -> StoreResult<bool> {
        let res = sqlx::query(
            "UPDATE cron_fires SET claimed_by = $2, claim_until = $3, \
           attempts = attempts + 1 \
         WHERE id = $1 AND status = 'claimed' AND inbox_id IS NULL \
           AND claim_until < $4",
        )
        .bind(id)
        .bind(holder)
        .bind(claim_until)
        .bind(now)
        .execute(self.writer())
        .await?;
        Ok(res.rows_affected() == 1)
    }

    async fn cron_fire_set_inbox(&self, id: i64, inbox_id: i64) -> StoreResult<()> {
        sqlx::query("UPDATE cron_fires SET inbox_id = $2 WHERE id = $1")
            .bind(id)
            .bind(inbox_id)
            .execute(self.writer())
            .await?;
        Ok(())
    }

    async fn cron_fire_finish(&self, id: i64, o: &FireOutcome) -> StoreResult<bool> {
        let res = sqlx::query(
            "UPDATE cron_fires SET status = $2, attempts = $3, \
           started_at = COALESCE($4, started_at), ended_at = $5, deliveries = $6, \
           note = $7, claim_until = NULL \
         WHERE id = $1 AND status = 'claimed'",
        )
        .bind(id)
        .bind(o.status.as_str())
        .bind(o.attempts)
        .bind(o.started_at)
        .bind(o.ended_at)
        .bind(o.deliveries)
        .bind(super::text::clean_opt(o.note.as_deref()))
        .execute(self.writer())
        .await?;
        Ok(res.rows_affected() == 1)
    }

    async fn cron_fires_open(&self, limit: i64) -> StoreResult<Vec<CronFire>> {
        let sql = format!(
            "SELECT {FIRE_COLS} FROM cron_fires WHERE status = 'claimed' \
         ORDER BY id LIMIT $1"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(limit)
            .fetch_all(self.writer())
            .await?;
        rows.iter().map(fire_from_row).collect()
    }

    async fn cron_fires(&self, job: Option<&str>, limit: i64) -> StoreResult<Vec<CronFire>> {
        let sql = format!(
            "SELECT {FIRE_COLS} FROM cron_fires WHERE ($1 = '' OR job = $1) \
         ORDER BY id DESC LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(job.unwrap_or(""))
            .bind(limit)
            .fetch_all(self.writer())
            .await?;
        rows.iter().map(fire_from_row).collect()
    }
}
