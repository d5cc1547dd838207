//! Cron jobs as data: a job as the operator writes it, its schedule, its catch-up rule and its
//! delivery targets, with their parsing and validation.
//!
//! These types live in `domain` because every layer names them: the config reads `[[cron.jobs]]`,
//! the store keeps job specs and fire rows, a lane worker delivers to a [`Target`], the
//! scheduler fires them. Everything here is pure: no clock reads, no store, no sending. The
//! I/O half (the scheduler task and the fire ledger) is `crate::cron`.

mod catchup;
mod check;
mod job;
mod schedule;
mod target;

pub use catchup::{
    due_fires, CatchUp, Due, UnknownCatchUp, CRON_COUNT_CAP, ON_TIME_GRACE, SKIPPED_LIST_CAP,
};
pub use check::{check_job, check_jobs, CheckError};
pub use job::{is_silent, JobError, JobSpec, ValidJob, MAX_JOB_NAME_LEN, SILENT_REPLY};
pub use schedule::{parse_schedule, CronExpr, Schedule, ScheduleError, MAX_INTERVAL, MIN_INTERVAL};
#[cfg(test)]
pub(crate) use target::test_known;
pub use target::{
    deserialize_targets, parse_target, split_chat_thread, Deliverable, DeliverablePlatform, Target,
    TargetError, TargetSyntax,
};
