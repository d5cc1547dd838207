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

/// The sender of a webhook run in `notify` mode (`crate::webhooks`): its text is the brief,
/// delivered to its targets as a scheduled run's reply would be, with no model call.
pub const HOOK_NOTIFY_SENDER: &str = "hook-notify";

/// Whether `ev` is such a run: only the webhook receiver writes scheduled events from this
/// sender (no person's message is ever `Scheduled`).
pub fn is_hook_notify(ev: &crate::domain::MessageEvent) -> bool {
    matches!(ev.origin, crate::domain::Origin::Scheduled { .. })
        && ev.sender_id == HOOK_NOTIFY_SENDER
}
