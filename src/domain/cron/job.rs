//! A cron job as the operator writes it (`[[cron.jobs]]` in the config) and as the scheduler
//! uses it once checked.
//!
//! Validation happens once, at config load, and reports every problem with the job's name, so
//! a bad job stops the daemon from starting instead of sitting silent. This module must not
//! read the clock or touch the store: turning a `ValidJob` into runs is the ledger's work.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::catchup::{CatchUp, UnknownCatchUp};
use super::schedule::{parse_schedule, Schedule, ScheduleError};
use super::target::{parse_target, Deliverable, Target, TargetError};
use crate::domain::LaneKey;

/// Longest job name; the name is part of the job's lane key and of ledger rows.
pub const MAX_JOB_NAME_LEN: usize = 64;

/// The reply that means "nothing worth sending": the run is recorded, nothing is delivered.
pub const SILENT_REPLY: &str = "[SILENT]";

/// One `[[cron.jobs]]` table, as written.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub name: String,
    /// `0 7 * * 1-5`, `every 30m`, `2026-12-01T07:00:00Z` or `at <RFC 3339>`.
    pub schedule: String,
    pub prompt: String,
    /// Delivery targets: `telegram:<chat>[:<thread>]`, `discord:<channel>[:<thread>]`,
    /// `web:<lane>`.
    #[serde(default)]
    pub deliver: Vec<String>,
    /// IANA zone for cron expressions; UTC when absent.
    #[serde(default)]
    pub timezone: Option<String>,
    /// `skip` or `once` (the default).
    #[serde(default)]
    pub catch_up: Option<String>,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
    /// The most one run may spend (`budget.cron_run` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::domain::Amount>,
}

fn enabled_by_default() -> bool {
    true
}

/// A job whose every field has been checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidJob {
    pub name: String,
    pub schedule: Schedule,
    pub prompt: String,
    pub targets: Vec<Target>,
    pub catch_up: CatchUp,
    pub enabled: bool,
}

impl ValidJob {
    /// The job's own lane, where its runs are recorded. Cron lanes never hand off.
    pub fn lane(&self) -> LaneKey {
        LaneKey::new(&format!("cron:{}", self.name))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("invalid cron job name {name:?}: use 1-64 characters from A-Z a-z 0-9 . _ -")]
    InvalidName { name: String },
    #[error("cron job {job:?}: {error}")]
    Schedule { job: String, error: ScheduleError },
    #[error("cron job {job:?}: {error}")]
    Target { job: String, error: TargetError },
    #[error("cron job {job:?}: the same destination {lane} is listed twice in deliver")]
    DuplicateTarget { job: String, lane: LaneKey },
    #[error("cron job {job:?}: no delivery targets (deliver = [\"telegram:<chat>\", …])")]
    NoTargets { job: String },
    #[error("cron job {job:?}: {error}")]
    CatchUp { job: String, error: UnknownCatchUp },
    #[error("cron job {job:?}: the prompt is empty")]
    EmptyPrompt { job: String },
}

impl JobSpec {
    /// Checks the job; its targets are parsed with the syntax of the platforms in `known`.
    pub fn validate(&self, known: &Deliverable) -> Result<ValidJob, JobError> {
        let name = &self.name;
        let name_ok = (1..=MAX_JOB_NAME_LEN).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !name_ok {
            return Err(JobError::InvalidName { name: name.clone() });
        }
        let job = || name.clone();
        let schedule = parse_schedule(&self.schedule, self.timezone.as_deref())
            .map_err(|error| JobError::Schedule { job: job(), error })?;
        if self.prompt.trim().is_empty() {
            return Err(JobError::EmptyPrompt { job: job() });
        }
        // A job that delivers nowhere runs for nobody: almost surely a forgotten line.
        if self.deliver.is_empty() {
            return Err(JobError::NoTargets { job: job() });
        }
        let mut targets = Vec::with_capacity(self.deliver.len());
        let mut lanes = HashSet::new();
        for raw in &self.deliver {
            let target =
                parse_target(raw, known).map_err(|error| JobError::Target { job: job(), error })?;
            // Two spellings of one chat would deliver the same brief twice.
            if !lanes.insert(target.lane_key()) {
                return Err(JobError::DuplicateTarget {
                    job: job(),
                    lane: target.lane_key(),
                });
            }
            targets.push(target);
        }
        let catch_up = match self.catch_up.as_deref() {
            None => CatchUp::default(),
            Some(s) => s
                .parse()
                .map_err(|error| JobError::CatchUp { job: job(), error })?,
        };
        Ok(ValidJob {
            name: name.clone(),
            schedule,
            prompt: self.prompt.clone(),
            targets,
            catch_up,
            enabled: self.enabled,
        })
    }
}

/// True when the model's reply says "nothing to deliver": exactly `[SILENT]` once surrounding
/// whitespace is trimmed. Anything more (`[SILENT] nothing new`) is a real reply and is sent,
/// because dropping text the model meant to send is worse than sending a stray marker.
pub fn is_silent(reply: &str) -> bool {
    reply.trim() == SILENT_REPLY
}

#[cfg(test)]
#[path = "job_tests.rs"]
mod tests;
