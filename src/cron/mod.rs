//! Cron-delivered briefs: the fire ledger's rules and the scheduler task.
//!
//! A job (`[[cron.jobs]]`) is validated once, its schedule says when it fires, the catch-up
//! rule says what to run after downtime, and its targets say where the reply goes: that pure
//! half is `crate::domain::cron`, because config, store and lanes name those types. The
//! [`scheduler`] task and the [`ledger`] rules are the I/O half: each fire is claimed once
//! through a unique (job, scheduled_at) ledger row and becomes an inbox event in the job's
//! lane; the lane workers run and deliver it. Nothing here sends a message.

pub mod access;
pub mod ledger;
mod platform;
pub mod scheduler;
pub mod tool;

/// The pure half lives in `domain::cron` (config, store and lanes name these types too); it is
/// re-exported here so `herald::cron::JobSpec` stays the one path callers know.
pub use crate::domain::cron::{
    check_job, check_jobs, due_fires, is_silent, parse_schedule, parse_target, CatchUp, CheckError,
    CronExpr, Due, JobError, JobSpec, Schedule, ScheduleError, Target, TargetError, UnknownCatchUp,
    ValidJob, ON_TIME_GRACE, SILENT_REPLY,
};
pub use platform::SPEC;
pub use scheduler::{Clock, Pass, Scheduler};
pub use tool::CronTool;
