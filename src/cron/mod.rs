//! Cron-delivered briefs: the scheduling rules, the fire ledger's rules and the scheduler task.
//!
//! A job (`[[cron.jobs]]`) is validated once ([`job`]), its schedule says when it fires
//! ([`schedule`]), the catch-up rule says what to run after downtime ([`catchup`]), and its
//! targets say where the reply goes ([`target`]); those modules are pure. The [`scheduler`]
//! task and the [`ledger`] rules are the I/O half: each fire is claimed once through a unique
//! (job, scheduled_at) ledger row and becomes an inbox event in the job's lane; the lane
//! workers run and deliver it. Nothing here sends a message.

pub mod catchup;
pub mod check;
pub mod job;
pub mod ledger;
pub mod schedule;
pub mod scheduler;
pub mod target;

pub use catchup::{due_fires, CatchUp, Due, UnknownCatchUp, ON_TIME_GRACE};
pub use check::{check_job, check_jobs, CheckError};
pub use job::{is_silent, JobError, JobSpec, ValidJob, SILENT_REPLY};
pub use schedule::{parse_schedule, CronExpr, Schedule, ScheduleError};
pub use scheduler::{Clock, Pass, Scheduler};
pub use target::{parse_target, Target, TargetError};
