//! The cron tables: jobs (from the config file or the CLI) and the fire ledger.
//!
//! The ledger's unique (job, scheduled_at) row is the whole exactly-once mechanism: a claim is
//! an `INSERT … ON CONFLICT DO NOTHING RETURNING`, so of any number of schedulers (threads,
//! processes, replicas on one Postgres) exactly one gets the id back and runs the fire. This
//! module holds SQL only; when to fire and what a run's outcome means is `crate::cron`'s work.
//! The SQL text is shared by both backends (`$N` placeholders, epoch-ms integers): ordinary
//! generic code over `sqlx::Database`, one impl for every backend that names its pools
//! ([`super::Pools`]).

use super::db;
use async_trait::async_trait;

use super::cron_types::*;
use super::{Pools, StoreError, StoreResult};
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

/// A job row as stored: the spec is JSON, the source and flag text and integer.
#[derive(sqlx::FromRow)]
struct JobRaw {
    name: String,
    spec: String,
    source: String,
    owner_person: Option<String>,
    paused: i64,
    paused_reason: Option<String>,
    anchor_at: i64,
    resumed_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

impl JobRaw {
    fn typed(self) -> StoreResult<CronJobRow> {
        Ok(CronJobRow {
            name: self.name,
            spec: serde_json::from_str(&self.spec)?,
            owner: self
                .source
                .strip_prefix(CHAT_SOURCE_PREFIX)
                .map(crate::domain::LaneKey::parse),
            source: JobSource::parse(&self.source),
            paused: self.paused != 0,
            owner_person: self.owner_person,
            paused_reason: self.paused_reason,
            anchor_at: self.anchor_at,
            resumed_at: self.resumed_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// A fire row as stored: status text, the manual flag an integer.
#[derive(sqlx::FromRow)]
struct FireRaw {
    id: i64,
    job: String,
    scheduled_at: i64,
    manual: i64,
    status: String,
    claimed_by: Option<String>,
    claim_until: Option<i64>,
    attempts: i64,
    inbox_id: Option<i64>,
    started_at: Option<i64>,
    ended_at: Option<i64>,
    missed_count: i64,
    deliveries: i64,
    note: Option<String>,
    created_at: i64,
}

impl FireRaw {
    fn typed(self) -> StoreResult<CronFire> {
        let status = FireStatus::parse(&self.status).ok_or_else(|| {
            StoreError::other(format!("unknown status {:?} in cron_fires", self.status))
        })?;
        Ok(CronFire {
            id: self.id,
            job: self.job,
            scheduled_at: self.scheduled_at,
            manual: self.manual != 0,
            status,
            claimed_by: self.claimed_by,
            claim_until: self.claim_until,
            attempts: self.attempts,
            inbox_id: self.inbox_id,
            started_at: self.started_at,
            ended_at: self.ended_at,
            missed_count: self.missed_count,
            deliveries: self.deliveries,
            note: self.note,
            created_at: self.created_at,
        })
    }
}

#[async_trait]
impl<S: Pools> CronStore for S {
    async fn cron_sync_config(&self, jobs: &[JobSpec], now: i64) -> StoreResult<()> {
        for spec in jobs {
            db::query(SYNC_UPSERT)
                .bind(&spec.name)
                .bind(super::text::clean_json(serde_json::to_string(spec)?))
                .bind(schedule_key(spec))
                .bind(now)
                .execute(self.writer())
                .await?;
        }
        let stored: Vec<(String,)> =
            db::query("SELECT name FROM cron_jobs WHERE source = 'config'")
                .fetch_all(self.writer())
                .await?;
        for (name,) in stored {
            if !jobs.iter().any(|j| j.name == name) {
                db::query("DELETE FROM cron_jobs WHERE name = $1 AND source = 'config'")
                    .bind(&name)
                    .execute(self.writer())
                    .await?;
            }
        }
        Ok(())
    }

    async fn cron_job_add(&self, spec: &JobSpec, now: i64) -> StoreResult<bool> {
        let res = db::query(JOB_INSERT)
            .bind(&spec.name)
            .bind(super::text::clean_json(serde_json::to_string(spec)?))
            .bind(schedule_key(spec))
            .bind(now)
            .bind("cli")
            .bind(None::<String>)
            .execute(self.writer())
            .await?;
        Ok(res == 1)
    }

    async fn cron_job_add_owned(
        &self,
        spec: &JobSpec,
        owner: &crate::domain::LaneKey,
        person: &str,
        now: i64,
    ) -> StoreResult<bool> {
        let res = db::query(JOB_INSERT)
            .bind(&spec.name)
            .bind(super::text::clean_json(serde_json::to_string(spec)?))
            .bind(schedule_key(spec))
            .bind(now)
            .bind(format!("{CHAT_SOURCE_PREFIX}{owner}"))
            .bind(Some(person.to_string()))
            .execute(self.writer())
            .await?;
        Ok(res == 1)
    }

    async fn cron_job_get(&self, name: &str) -> StoreResult<Option<CronJobRow>> {
        let sql = format!("SELECT {JOB_COLS} FROM cron_jobs WHERE name = $1");
        let row: Option<JobRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(name)
            .fetch_optional(self.writer())
            .await?;
        row.map(JobRaw::typed).transpose()
    }

    async fn cron_jobs(&self) -> StoreResult<Vec<CronJobRow>> {
        let sql = format!("SELECT {JOB_COLS} FROM cron_jobs ORDER BY name");
        let rows: Vec<JobRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.writer())
            .await?;
        rows.into_iter().map(JobRaw::typed).collect()
    }

    async fn cron_job_remove(&self, name: &str) -> StoreResult<bool> {
        let res = db::query("DELETE FROM cron_jobs WHERE name = $1")
            .bind(name)
            .execute(self.writer())
            .await?;
        Ok(res == 1)
    }

    async fn cron_job_set_paused(&self, name: &str, paused: bool, now: i64) -> StoreResult<bool> {
        let res = db::query(
            "UPDATE cron_jobs SET paused = $2, updated_at = $3, paused_reason = NULL, \
           resumed_at = CASE WHEN $2 = 0 AND paused <> 0 THEN $3 ELSE resumed_at END \
         WHERE name = $1",
        )
        .bind(name)
        .bind(i64::from(paused))
        .bind(now)
        .execute(self.writer())
        .await?;
        Ok(res == 1)
    }

    async fn cron_job_pause_because(
        &self,
        name: &str,
        reason: &str,
        now: i64,
    ) -> StoreResult<bool> {
        let res = db::query(
            "UPDATE cron_jobs SET paused = 1, paused_reason = $2, updated_at = $3 \
             WHERE name = $1 AND paused = 0",
        )
        .bind(name)
        .bind(&*super::text::clean(reason))
        .bind(now)
        .execute(self.writer())
        .await?;
        Ok(res == 1)
    }

    async fn cron_last_scheduled(&self, job: &str) -> StoreResult<Option<i64>> {
        let (last,): (Option<i64>,) =
            db::query("SELECT MAX(scheduled_at) FROM cron_fires WHERE job = $1 AND manual = 0")
                .bind(job)
                .fetch_one(self.writer())
                .await?;
        Ok(last)
    }

    async fn cron_fire_claim(&self, f: &NewFire) -> StoreResult<Option<i64>> {
        let id: Option<(i64,)> = db::query(FIRE_INSERT)
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
        let id: Option<(i64,)> = db::query(FIRE_INSERT)
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
        let res = db::query(
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
        Ok(res == 1)
    }

    async fn cron_fire_set_inbox(&self, id: i64, inbox_id: i64) -> StoreResult<()> {
        db::query("UPDATE cron_fires SET inbox_id = $2 WHERE id = $1")
            .bind(id)
            .bind(inbox_id)
            .execute(self.writer())
            .await?;
        Ok(())
    }

    async fn cron_fire_finish(&self, id: i64, o: &FireOutcome) -> StoreResult<bool> {
        let res = db::query(
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
        Ok(res == 1)
    }

    async fn cron_fires_open(&self, limit: i64) -> StoreResult<Vec<CronFire>> {
        let sql = format!(
            "SELECT {FIRE_COLS} FROM cron_fires WHERE status = 'claimed' \
         ORDER BY id LIMIT CAST($1 AS BIGINT)"
        );
        let rows: Vec<FireRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(limit)
            .fetch_all(self.writer())
            .await?;
        rows.into_iter().map(FireRaw::typed).collect()
    }

    async fn cron_fires(&self, job: Option<&str>, limit: i64) -> StoreResult<Vec<CronFire>> {
        let sql = format!(
            "SELECT {FIRE_COLS} FROM cron_fires WHERE ($1 = '' OR job = $1) \
         ORDER BY id DESC LIMIT CAST($2 AS BIGINT)"
        );
        let rows: Vec<FireRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(job.unwrap_or(""))
            .bind(limit)
            .fetch_all(self.writer())
            .await?;
        rows.into_iter().map(FireRaw::typed).collect()
    }
}
