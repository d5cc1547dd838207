//! The scheduler task: turns stored jobs into fires, exactly once per scheduled time.
//!
//! Each pass reads the jobs, asks [`due_fires`] what to run for each, records skipped times,
//! claims the run through the ledger's unique (job, scheduled_at) row and writes the fire's
//! inbox event; the lane worker runs it. Later passes read finished runs back into the ledger.
//! Any number of schedulers may run on one store (threads, replicas): the claim decides. The
//! clock is injected so tests can stand at any instant. This task must not run turns or
//! deliver: the lanes do, under their leases.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::ledger::{fire_event, fire_key, outcome};
use crate::domain::cron::{check_job, due_fires, Deliverable, Due, JobSpec, ValidJob};

use crate::lanes::Ingest;
use crate::store::{CronFire, CronJobRow, NewFire, Store, StoreResult};

/// How long a claim may go without its inbox event before another scheduler takes it over.
/// Writing the event takes milliseconds; only a crash in between leaves a claim this old.
pub const CLAIM_TTL_MS: i64 = 30_000;
/// Longest sleep between passes, so CLI changes (add, pause, run) are seen soon.
pub const MAX_SLEEP: Duration = Duration::from_secs(30);
/// Poll interval while runs are open: one may finish on another replica.
const OPEN_POLL: Duration = Duration::from_secs(2);
const ERROR_BACKOFF: Duration = Duration::from_secs(5);

pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

pub struct Scheduler {
    store: Arc<dyn Store>,
    /// Fires become inbox events of the job's lane through this, like any adapter's.
    ingest: Ingest,
    holder: String,
    clock: Clock,
    platforms: Deliverable,
    /// Inbox ids of runs in flight: their finish wakes the loop.
    open: Mutex<HashSet<i64>>,
    /// Stored jobs found invalid, warned about once.
    warned: Mutex<HashSet<String>>,
    /// Poked when a job changes in this process (the `cron` tool), to look at once.
    poke: Arc<tokio::sync::Notify>,
    /// Who may use the agent: a chat job's maker is checked again at each fire (`access.rs`).
    access: Option<crate::hooks::Authorizer>,
}

/// What one pass did.
#[derive(Debug, Default, Clone)]
pub struct Pass {
    /// Fires this scheduler claimed and started.
    pub started: usize,
    /// Scheduled times recorded as skipped.
    pub skipped: usize,
    /// Runs whose outcome this pass wrote into the ledger.
    pub finished: usize,
    /// Runs still going.
    pub open: usize,
    /// The earliest next fire of any active job.
    pub next: Option<DateTime<Utc>>,
}

fn from_ms(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::UNIX_EPOCH)
}

impl Scheduler {
    /// A scheduler delivering to `platforms` (the deployment's, see
    /// `Config::deliverable`).
    pub fn new(
        store: Arc<dyn Store>,
        ingest: Ingest,
        platforms: Deliverable,
        holder: &str,
    ) -> Scheduler {
        Scheduler {
            store,
            ingest,
            holder: holder.to_string(),
            clock: Arc::new(Utc::now),
            platforms,
            open: Mutex::new(HashSet::new()),
            warned: Mutex::new(HashSet::new()),
            poke: Arc::new(tokio::sync::Notify::new()),
            access: None,
        }
    }

    /// Checks a chat job's maker against `auth` (and approved pairings) at each fire.
    pub fn with_access(mut self, auth: crate::hooks::Authorizer) -> Scheduler {
        self.access = Some(auth);
        self
    }

    /// Shares the wake-up the `cron` tool pokes after it changed a job.
    pub fn with_poke(mut self, poke: Arc<tokio::sync::Notify>) -> Scheduler {
        self.poke = poke;
        self
    }

    /// Replaces the clock (tests stand at chosen instants).
    pub fn with_clock(mut self, clock: Clock) -> Scheduler {
        self.clock = clock;
        self
    }

    /// Stores the config file's jobs (see [`crate::store::CronStore::cron_sync_config`]).
    pub async fn sync_config(&self, jobs: &[JobSpec]) -> StoreResult<()> {
        let now = (self.clock)().timestamp_millis();
        self.store.cron_sync_config(jobs, now).await?;
        for spec in jobs {
            if let Some(row) = self.store.cron_job_get(&spec.name).await? {
                if row.source != crate::store::JobSource::Config {
                    tracing::warn!(job = %spec.name, "a job added with `herald cron add` has this name; the config file's job is ignored");
                }
            }
        }
        tracing::info!(jobs = jobs.len(), "cron jobs from the config synced");
        Ok(())
    }

    /// One pass over every job and every open run.
    pub async fn tick(&self) -> StoreResult<Pass> {
        let now = (self.clock)();
        let mut pass = Pass::default();
        for row in self.store.cron_jobs().await? {
            let Some(job) = self.valid(&row) else {
                continue;
            };
            if !job.enabled || row.paused {
                continue;
            }
            let anchor = from_ms(row.anchor_at);
            let last = self.store.cron_last_scheduled(&job.name).await?;
            // Fires before the anchor (an earlier job of this name) or before a resume never
            // count.
            let from = last
                .max(row.resumed_at)
                .map(from_ms)
                .filter(|t| *t > anchor);
            let due = due_fires(&job.schedule, anchor, from, now, job.catch_up);
            pass.skipped += self.record_skipped(&job, &due).await?;
            if let Some(at) = due.run {
                if let Some(why) = self.owner_lost_access(&row).await {
                    pass.skipped += usize::from(self.pause_for(&job, at, &why, now).await?);
                    continue;
                }
                pass.started += usize::from(self.start(&job, at, &due, now).await?);
            }
            if let Some(next) = job.schedule.next_after(now, anchor) {
                pass.next = Some(pass.next.map_or(next, |n| n.min(next)));
            }
        }
        for fire in self.store.cron_fires_open(200).await? {
            match fire.inbox_id {
                Some(inbox) => {
                    if self.finish(&fire, inbox).await? {
                        pass.finished += 1;
                    } else {
                        pass.open += 1;
                    }
                }
                None => {
                    self.reclaim(&fire, now).await?;
                    pass.open += 1;
                }
            }
        }
        Ok(pass)
    }

    fn valid(&self, row: &CronJobRow) -> Option<ValidJob> {
        match check_job(&row.spec, &self.platforms) {
            Ok(job) => Some(job),
            Err(e) => {
                if self
                    .warned
                    .lock()
                    .expect("warned lock")
                    .insert(row.name.clone())
                {
                    tracing::warn!(job = %row.name, error = %e, "stored cron job is invalid here; not scheduled");
                }
                None
            }
        }
    }

    async fn owner_lost_access(&self, row: &CronJobRow) -> Option<String> {
        let auth = self.access.as_ref()?;
        super::access::owner_lost_access(auth, self.store.as_ref(), row).await
    }

    /// Skips the fire at `at` and pauses the job, keeping `why` for `herald cron list`.
    async fn pause_for(
        &self,
        job: &ValidJob,
        at: DateTime<Utc>,
        why: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let skipped = NewFire {
            job: job.name.clone(),
            scheduled_at: at.timestamp_millis(),
            manual: false,
            holder: self.holder.clone(),
            claim_until: 0,
            missed_count: 1,
            note: Some(format!("not run: {why}")),
        };
        let recorded = self.store.cron_fire_skip(&skipped).await?;
        if self
            .store
            .cron_job_pause_because(&job.name, why, now.timestamp_millis())
            .await?
        {
            metrics::counter!("herald_cron_jobs_paused_total", "reason" => "owner_access")
                .increment(1);
            tracing::warn!(job = %job.name, reason = why, "cron job paused: its fire was skipped; resume it with `herald cron resume` once its owner may use the agent again");
        }
        Ok(recorded)
    }

    async fn record_skipped(&self, job: &ValidJob, due: &Due) -> StoreResult<usize> {
        let unlisted = due.skipped_count.saturating_sub(due.skipped.len());
        let mut recorded = 0;
        for (i, at) in due.skipped.iter().enumerate() {
            // The oldest listed row stands for the fires too old to list one by one.
            let (missed, note) = if i == 0 && unlisted > 0 {
                (
                    unlisted as i64 + 1,
                    format!("missed (catch_up = skip), with {unlisted} earlier fires"),
                )
            } else {
                (1, "missed (catch_up = skip)".to_string())
            };
            let row = NewFire {
                job: job.name.clone(),
                scheduled_at: at.timestamp_millis(),
                manual: false,
                holder: self.holder.clone(),
                claim_until: 0,
                missed_count: missed,
                note: Some(note),
            };
            if self.store.cron_fire_skip(&row).await? {
                recorded += 1;
                metrics::counter!("herald_cron_fires_total", "status" => "skipped").increment(1);
                tracing::info!(job = %job.name, scheduled_at = %at, "cron fire skipped");
            }
        }
        Ok(recorded)
    }

    /// Claims the fire at `at`; true when this scheduler won the claim and wrote the event.
    async fn start(
        &self,
        job: &ValidJob,
        at: DateTime<Utc>,
        due: &Due,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let claim = NewFire {
            job: job.name.clone(),
            scheduled_at: at.timestamp_millis(),
            manual: false,
            holder: self.holder.clone(),
            claim_until: now.timestamp_millis() + CLAIM_TTL_MS,
            missed_count: due.missed_count as i64,
            note: (due.missed_count > 0).then(|| {
                let approx = if due.counts_estimated { "about " } else { "" };
                format!(
                    "catch-up: {approx}{} missed fires run once",
                    due.missed_count
                )
            }),
        };
        let Some(id) = self.store.cron_fire_claim(&claim).await? else {
            return Ok(false);
        };
        self.ingest(id, job, at.timestamp_millis(), false).await?;
        tracing::info!(job = %job.name, fire = id, scheduled_at = %at, missed = due.missed_count, "cron fire started");
        Ok(true)
    }

    async fn ingest(&self, fire: i64, job: &ValidJob, at_ms: i64, manual: bool) -> StoreResult<()> {
        let key = fire_key(&job.name, at_ms, manual);
        let inbox = self
            .ingest
            .ingest(&fire_event(job, &key, from_ms(at_ms)))
            .await?
            .id();
        self.open.lock().expect("open lock").insert(inbox);
        self.store.cron_fire_set_inbox(fire, inbox).await
    }

    /// A claim whose holder died before writing the event: take it over and write it. The
    /// event's key is the fire's, so a holder that did write it just before dying costs nothing.
    async fn reclaim(&self, fire: &CronFire, now: DateTime<Utc>) -> StoreResult<()> {
        let now_ms = now.timestamp_millis();
        if fire.claim_until.unwrap_or(0) >= now_ms {
            return Ok(());
        }
        let Some(job) = self.store.cron_job_get(&fire.job).await? else {
            return Ok(());
        };
        let Some(job) = self.valid(&job) else {
            return Ok(());
        };
        if self
            .store
            .cron_fire_reclaim(fire.id, &self.holder, now_ms + CLAIM_TTL_MS, now_ms)
            .await?
        {
            tracing::warn!(job = %fire.job, fire = fire.id, "cron fire claim expired before its run was queued; queuing it now");
            self.ingest(fire.id, &job, fire.scheduled_at, fire.manual)
                .await?;
        }
        Ok(())
    }

    /// Writes a finished run's outcome into the ledger; false while it is still running.
    async fn finish(&self, fire: &CronFire, inbox_id: i64) -> StoreResult<bool> {
        let Some(inbox) = self.store.inbox_get(inbox_id).await? else {
            return Ok(false);
        };
        let Some(out) = outcome(self.store.as_ref(), fire, &inbox).await? else {
            self.open.lock().expect("open lock").insert(inbox_id);
            return Ok(false);
        };
        self.open.lock().expect("open lock").remove(&inbox_id);
        if self.store.cron_fire_finish(fire.id, &out).await? {
            let status = out.status.as_str();
            let duration_ms = out.started_at.map(|s| out.ended_at - s);
            metrics::counter!("herald_cron_fires_total", "status" => status).increment(1);
            tracing::info!(
                job = %fire.job,
                fire = fire.id,
                status,
                attempts = out.attempts,
                duration_ms,
                deliveries = out.deliveries,
                note = out.note.as_deref().unwrap_or(""),
                "cron fire finished"
            );
        }
        Ok(true)
    }

    fn is_open(&self, inbox_id: i64) -> bool {
        self.open.lock().expect("open lock").contains(&inbox_id)
    }

    /// The scheduler loop: a pass, then sleep until the next fire (at most [`MAX_SLEEP`]),
    /// a run of ours finishing, or cancellation.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let mut finished = self.ingest.subscribe_finished();
        loop {
            let wait = match self.tick().await {
                Ok(pass) => {
                    let until_next = pass.next.map_or(MAX_SLEEP, |next| {
                        (next - (self.clock)())
                            .to_std()
                            .unwrap_or(Duration::ZERO)
                            .max(Duration::from_millis(20))
                    });
                    let wait = until_next.min(MAX_SLEEP);
                    if pass.open > 0 {
                        wait.min(OPEN_POLL)
                    } else {
                        wait
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cron pass failed; retrying");
                    ERROR_BACKOFF
                }
            };
            let deadline = tokio::time::Instant::now() + wait;
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep_until(deadline) => break,
                    _ = self.poke.notified() => break,
                    r = finished.recv() => match r {
                        Ok(id) if self.is_open(id) => break,
                        Ok(_) => {}
                        Err(RecvError::Lagged(_)) => break,
                        Err(RecvError::Closed) => {
                            tokio::select! {
                                _ = cancel.cancelled() => return,
                                _ = tokio::time::sleep_until(deadline) => break,
                            }
                        }
                    },
                }
            }
        }
    }
}
