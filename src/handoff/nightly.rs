//! The nightly closer: once a night, conversations that went quiet get a capsule and their
//! session closed, so the next message starts fresh and carries on from the capsule.
//!
//! Guard rails (enough dialogue, active recently, idle now, never a cron lane, never a session
//! that already has a capsule) are the store's candidate query; each candidate then goes
//! through the same [`Builder`] as a typed `handoff`, under the lane's build claim. One replica
//! runs a night's pass (the `role:handoff-nightly` lease), and the night's budget is a counter
//! in the store, so a restart mid-pass resumes without passing the cap. This module must not
//! write transcripts or close sessions itself: the builder's rotation event does, under the
//! lane lease.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::builder::{BuildJob, Builder, Trigger};
use crate::config::HandoffConfig;
use crate::domain::cron::Schedule;
use crate::domain::LaneKey;
use crate::store::{CandidateQuery, NightlyCandidate, StoreError};

/// The singleton role lease: the replica holding it runs the pass.
pub const NIGHTLY_LEASE: &str = "role:handoff-nightly";
/// A pass missed by downtime still runs when the daemon is back within this window; later
/// than that, the night is skipped (the next one catches the same conversations).
pub const CATCH_UP: Duration = Duration::from_secs(6 * 3600);
/// Longest sleep between checks, so a changed wall clock is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(600);

/// The guard rails, from `[handoff]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NightlyRules {
    pub min_messages: u32,
    pub active_within: Duration,
    pub idle: Duration,
    pub cap: u32,
}

impl NightlyRules {
    pub fn from_config(c: &HandoffConfig) -> NightlyRules {
        NightlyRules {
            min_messages: c.nightly_min_messages,
            active_within: Duration::from_secs(c.nightly_active_within_hours * 3600),
            idle: Duration::from_secs(c.nightly_idle_minutes * 60),
            cap: c.nightly_cap,
        }
    }

    /// The candidate query as seen at `now` (epoch ms).
    pub fn query(&self, now: i64) -> CandidateQuery {
        CandidateQuery {
            min_messages: i64::from(self.min_messages),
            active_since: now - ms(self.active_within),
            idle_before: now - ms(self.idle),
            limit: i64::from(self.cap),
        }
    }
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Which pass: a night's scheduled one (its budget and "done" mark are keyed by the fire
/// time) or one an operator started (a budget of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    Scheduled(DateTime<Utc>),
    Manual,
}

/// What a pass did, for the log, the CLI and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PassReport {
    /// Another replica holds the role: this one did nothing.
    pub busy: bool,
    /// This night's pass had already finished.
    pub already_done: bool,
    pub candidates: usize,
    /// (lane, outcome) per candidate taken, in order: a build status, or `no_chat` for a lane
    /// whose chat is unknown.
    pub builds: Vec<(String, String)>,
    /// The night's budget ran out before the candidates did.
    pub capped: bool,
}

pub struct NightlyCloser {
    builder: Arc<Builder>,
    schedule: Option<Schedule>,
    rules: NightlyRules,
}

impl NightlyCloser {
    /// Errors name the config key at fault (see [`HandoffConfig::nightly_schedule`]).
    pub fn new(builder: Arc<Builder>, config: &HandoffConfig) -> anyhow::Result<NightlyCloser> {
        let schedule = config
            .nightly_schedule()
            .map_err(|(key, e)| anyhow::anyhow!("{key}: {e}"))?;
        Ok(NightlyCloser {
            builder,
            schedule,
            rules: NightlyRules::from_config(config),
        })
    }

    pub fn rules(&self) -> &NightlyRules {
        &self.rules
    }

    /// What a pass at `now` would take, without taking anything (`--dry-run`).
    pub async fn candidates(
        &self,
        now: DateTime<Utc>,
    ) -> Result<Vec<NightlyCandidate>, StoreError> {
        let q = self.rules.query(now.timestamp_millis());
        self.builder.store.nightly_candidates(&q).await
    }

    /// One pass at `now`: holds the role lease, writes a capsule for each candidate within the
    /// budget, and marks a scheduled night done unless it was cut short.
    pub async fn pass(
        &self,
        now: DateTime<Utc>,
        kind: PassKind,
        cancel: &CancellationToken,
    ) -> Result<PassReport, StoreError> {
        let store = &self.builder.store;
        let holder = format!("{}/nightly", self.builder.replica_id);
        // The lease must outlive one build; it is renewed before each.
        let ttl = Duration::from_secs(self.builder.config.build_timeout_secs + 60);
        let Some(lease) = store.lease_acquire(NIGHTLY_LEASE, &holder, ttl).await? else {
            tracing::info!("nightly handoff pass: another replica holds the role");
            return Ok(PassReport {
                busy: true,
                ..PassReport::default()
            });
        };
        let key = ledger_key(kind);
        let result = self.pass_held(now, &key, kind, cancel, &lease, ttl).await;
        if let Err(e) = store.lease_release(&lease).await {
            tracing::warn!(error = %e, "nightly role lease not released; it expires");
        }
        let report = result?;
        tracing::info!(
            night = %key,
            candidates = report.candidates,
            built = report.builds.len(),
            capped = report.capped,
            already_done = report.already_done,
            "nightly handoff pass finished"
        );
        Ok(report)
    }

    async fn pass_held(
        &self,
        now: DateTime<Utc>,
        key: &str,
        kind: PassKind,
        cancel: &CancellationToken,
        lease: &crate::store::Lease,
        ttl: Duration,
    ) -> Result<PassReport, StoreError> {
        let store = &self.builder.store;
        let done_key = format!("{key}:done");
        let mut report = PassReport::default();
        if store.kv_get(&done_key).await?.is_some() {
            report.already_done = true;
            return Ok(report);
        }
        let candidates = self.candidates(now).await?;
        report.candidates = candidates.len();
        for c in candidates {
            if cancel.is_cancelled() {
                return Ok(report);
            }
            // Lost the role (a stall longer than the lease): the new holder carries on.
            store.lease_renew(lease, ttl).await?;
            let status = match self.close_one(&c, key, cancel).await? {
                Some(status) => status,
                None => {
                    report.capped = true;
                    break;
                }
            };
            metrics::counter!("herald_handoff_nightly_total", "status" => status.clone())
                .increment(1);
            report.builds.push((c.lane.clone(), status));
        }
        if !cancel.is_cancelled() && matches!(kind, PassKind::Scheduled(_)) {
            store
                .kv_set(&done_key, &serde_json::to_string(&report)?)
                .await?;
        }
        Ok(report)
    }

    /// Builds one candidate's capsule; `None` when the night's budget is spent.
    async fn close_one(
        &self,
        c: &NightlyCandidate,
        key: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<String>, StoreError> {
        let b = &self.builder;
        let lane = LaneKey::parse(&c.lane);
        let Some(ev) = b.store.lane_last_event(&lane).await? else {
            tracing::warn!(lane = %lane, "nightly handoff: the lane has no inbox event to find its chat; skipped");
            return Ok(Some("no_chat".into()));
        };
        let holder = format!("{}/{}", b.replica_id, uuid::Uuid::new_v4().simple());
        let claim_ttl = Duration::from_secs(b.config.build_timeout_secs);
        if !b.store.handoff_claim(&lane, &holder, claim_ttl).await? {
            return Ok(Some(super::BuildStatus::AlreadyRunning.as_str().into()));
        }
        let budget = b
            .store
            .nightly_reserve(key, i64::from(self.rules.cap), crate::store::now_ms())
            .await;
        let built = match budget {
            Ok(Some(_)) => {
                let job = BuildJob {
                    lane: lane.clone(),
                    platform: ev.platform,
                    chat_id: ev.chat_id,
                    thread_id: ev.thread_id,
                    session_id: c.session_id.clone(),
                    trigger: Trigger::Nightly,
                    payer: crate::domain::Payer::System,
                    agent: None,
                };
                Some(match b.build(&job, cancel).await {
                    Ok(Some(r)) => r.status.as_str().to_string(),
                    Ok(None) => "cancelled".into(),
                    Err(e) => {
                        tracing::error!(lane = %lane, error = %e, "nightly capsule build failed in the store");
                        super::BuildStatus::WriteFailed.as_str().into()
                    }
                })
            }
            Ok(None) => None,
            Err(e) => {
                let _ = b.store.handoff_release(&lane, &holder).await;
                return Err(e);
            }
        };
        if let Err(e) = b.store.handoff_release(&lane, &holder).await {
            tracing::warn!(lane = %lane, error = %e, "build claim not released; it expires");
        }
        Ok(built)
    }

    /// The scheduled loop: run the latest due night's pass (within [`CATCH_UP`]) once, then
    /// sleep until the next fire. Returns at once when no schedule is configured.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let Some(schedule) = self.schedule.clone() else {
            return;
        };
        let anchor = DateTime::UNIX_EPOCH;
        let mut handled: Option<DateTime<Utc>> = None;
        loop {
            let now = Utc::now();
            let due = schedule
                .latest_at_or_before(now, anchor)
                .filter(|fire| (now - *fire).to_std().is_ok_and(|late| late <= CATCH_UP))
                .filter(|fire| handled != Some(*fire));
            if let Some(fire) = due {
                match self.pass(now, PassKind::Scheduled(fire), &cancel).await {
                    // Busy: the other replica finishes it; looking again later costs one read.
                    Ok(r) if !r.busy => handled = Some(fire),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "nightly handoff pass failed; retrying later")
                    }
                }
            }
            let wait = schedule
                .next_after(Utc::now(), anchor)
                .and_then(|next| (next - Utc::now()).to_std().ok())
                .unwrap_or(MAX_SLEEP)
                .min(MAX_SLEEP);
            if crate::tasks::sleep_or_cancel(wait, &cancel).await.is_err() {
                return;
            }
        }
    }
}

/// The budget key of a pass: one per scheduled night (`handoff-nightly:2026-05-01T03:00:00Z`),
/// one per manual run.
fn ledger_key(kind: PassKind) -> String {
    match kind {
        PassKind::Scheduled(at) => format!(
            "handoff-nightly:{}",
            at.to_rfc3339_opts(SecondsFormat::Secs, true)
        ),
        PassKind::Manual => format!("handoff-nightly:manual:{}", uuid::Uuid::new_v4().simple()),
    }
}
