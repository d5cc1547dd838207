//! Cron-delivered briefs: the pure scheduling core.
//!
//! A job (`[[cron.jobs]]`) is validated once ([`job`]), its schedule says when it fires
//! ([`schedule`]), the catch-up rule says what to run after downtime ([`catchup`]), and its
//! targets say where the reply goes ([`target`]). Nothing here reads the clock, touches the
//! store or sends a message: the ledger claims each fire once through a unique
//! (job, scheduled_at) row and the lane workers run and deliver it.

pub mod catchup;
pub mod job;
pub mod schedule;
pub mod target;

pub use catchup::{due_fires, CatchUp, Due, UnknownCatchUp, ON_TIME_GRACE};
pub use job::{is_silent, JobError, JobSpec, ValidJob, SILENT_REPLY};
pub use schedule::{parse_schedule, CronExpr, Schedule, ScheduleError};
pub use target::{parse_target, Target, TargetError};
