//! Row types of the cron tables (`cron_jobs`, `cron_fires`). Serializable because the admin API
//! and `herald cron list` show them. Plain data: the rules live in `crate::cron`.

use serde::Serialize;

use crate::domain::cron::JobSpec;
use crate::domain::LaneKey;

/// Where a job was declared. Config jobs are replaced at every start; CLI jobs stay until
/// `herald cron remove`; chat jobs were created by the agent's `cron` tool in a conversation
/// and belong to that lane ([`CronJobRow::owner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobSource {
    Config,
    Cli,
    Chat,
}

/// The `source` column of a chat job is this prefix and the owning lane's key.
pub(super) const CHAT_SOURCE_PREFIX: &str = "chat:";

impl JobSource {
    pub fn as_str(self) -> &'static str {
        match self {
            JobSource::Config => "config",
            JobSource::Cli => "cli",
            JobSource::Chat => "chat",
        }
    }

    pub(super) fn parse(s: &str) -> JobSource {
        if s == "config" {
            JobSource::Config
        } else if s.starts_with(CHAT_SOURCE_PREFIX) {
            JobSource::Chat
        } else {
            JobSource::Cli
        }
    }
}

/// A stored job.
#[derive(Debug, Clone, Serialize)]
pub struct CronJobRow {
    pub name: String,
    pub spec: JobSpec,
    pub source: JobSource,
    /// The lane a chat job belongs to (only its conversation may list, pause or remove it).
    pub owner: Option<LaneKey>,
    /// Who made a chat job (`platform:sender`); re-checked for access at each fire.
    pub owner_person: Option<String>,
    pub paused: bool,
    /// Why the daemon paused the job (its owner lost access); none when paused by hand.
    pub paused_reason: Option<String>,
    /// Start of the schedule (epoch ms): creation, or the last schedule change.
    pub anchor_at: i64,
    /// When the job was last resumed: fires before it never run.
    pub resumed_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What became of one scheduled time of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FireStatus {
    /// A scheduler took it and the run is under way (or its claim expired and it will be
    /// taken again).
    Claimed,
    /// Ran and delivered.
    Ok,
    /// Ran and failed (model error, timeout): nothing delivered.
    Failed,
    /// Ran; the reply was `[SILENT]`: nothing delivered.
    Silent,
    /// Never ran: missed during downtime under `catch_up = "skip"`, or while paused.
    Skipped,
    /// Ran to completion on a later attempt, after a crash or a shutdown cut the first one.
    Retried,
    /// Never ran to completion: the lane set the event aside (repeated crashes).
    Missed,
}

impl FireStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FireStatus::Claimed => "claimed",
            FireStatus::Ok => "ok",
            FireStatus::Failed => "failed",
            FireStatus::Silent => "silent",
            FireStatus::Skipped => "skipped",
            FireStatus::Retried => "retried",
            FireStatus::Missed => "missed",
        }
    }

    pub fn parse(s: &str) -> Option<FireStatus> {
        Some(match s {
            "claimed" => FireStatus::Claimed,
            "ok" => FireStatus::Ok,
            "failed" => FireStatus::Failed,
            "silent" => FireStatus::Silent,
            "skipped" => FireStatus::Skipped,
            "retried" => FireStatus::Retried,
            "missed" => FireStatus::Missed,
            _ => return None,
        })
    }
}

/// One ledger row.
#[derive(Debug, Clone, Serialize)]
pub struct CronFire {
    pub id: i64,
    pub job: String,
    /// The scheduled time (epoch ms); for a manual run, the time it was asked for.
    pub scheduled_at: i64,
    /// `herald cron run`, not the schedule.
    pub manual: bool,
    pub status: FireStatus,
    pub claimed_by: Option<String>,
    pub claim_until: Option<i64>,
    /// Claims of the fire, then the lane's attempts at the run once it finished.
    pub attempts: i64,
    pub inbox_id: Option<i64>,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    /// Scheduled times this row stands for that did not run on time (catch-up).
    pub missed_count: i64,
    /// Target lanes the brief was queued for.
    pub deliveries: i64,
    pub note: Option<String>,
    pub created_at: i64,
}

/// A fire about to be claimed.
#[derive(Debug, Clone)]
pub struct NewFire {
    pub job: String,
    pub scheduled_at: i64,
    pub manual: bool,
    pub holder: String,
    pub claim_until: i64,
    pub missed_count: i64,
    pub note: Option<String>,
}

/// The end of a run, as the ledger records it.
#[derive(Debug, Clone)]
pub struct FireOutcome {
    pub status: FireStatus,
    pub attempts: i64,
    pub started_at: Option<i64>,
    pub ended_at: i64,
    pub deliveries: i64,
    pub note: Option<String>,
}
