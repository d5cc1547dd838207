//! What to run now: the catch-up decision after the daemon was down or slow.
//!
//! Given the newest scheduled time the ledger has accounted for and the present instant, this
//! says which single scheduled time (if any) to run now and which ones will never run, in a
//! form the ledger can record. It is pure and bounded: a job that fires every second and was
//! down for a year is decided with arithmetic, not by walking 31 million fires. It must not
//! claim runs or write anything; the ledger's unique (job, scheduled_at) row does that.

use std::str::FromStr;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use super::schedule::{interval_ms, Schedule};

/// How late a fire may start and still count as on time. A fire found later than this was
/// missed (the daemon was down or stalled) and the job's catch-up policy decides. One minute
/// covers a restart or a slow tick without turning a real outage into a silent late run.
pub const ON_TIME_GRACE: TimeDelta = TimeDelta::seconds(60);
/// At most this many skipped times are listed (the newest ones); the count stays exact.
pub const SKIPPED_LIST_CAP: usize = 32;
/// Cron fires counted one by one before the count becomes an estimate.
pub const CRON_COUNT_CAP: usize = 1_000;

/// What to do with fires missed while the daemon was not running them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatchUp {
    /// Missed fires never run; only a fire that is on time runs.
    Skip,
    /// Missed fires collapse into one run, for the newest missed time. The default: a morning
    /// brief whose minute fell inside a restart should still arrive, once.
    #[default]
    Once,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown catch_up policy {0:?} (expected \"skip\" or \"once\")")]
pub struct UnknownCatchUp(pub String);

impl FromStr for CatchUp {
    type Err = UnknownCatchUp;

    fn from_str(s: &str) -> Result<CatchUp, UnknownCatchUp> {
        match s.trim().to_ascii_lowercase().as_str() {
            "skip" => Ok(CatchUp::Skip),
            "once" => Ok(CatchUp::Once),
            _ => Err(UnknownCatchUp(s.to_string())),
        }
    }
}

/// The decision for one job at one instant, ready to be written into the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Due {
    /// The scheduled time to run now (the ledger key of the run), or `None`.
    pub run: Option<DateTime<Utc>>,
    /// Scheduled times that will never run, oldest first; only the newest
    /// [`SKIPPED_LIST_CAP`] of them.
    pub skipped: Vec<DateTime<Utc>>,
    /// How many scheduled times will never run (the list above may be shorter).
    pub skipped_count: usize,
    /// How many scheduled times passed without running on time. Under `Once` they are
    /// folded into `run`; under `Skip` they are the skipped ones.
    pub missed_count: usize,
    /// True when the counts are an estimate (a cron job with more than [`CRON_COUNT_CAP`]
    /// fires in the window); the run and the list are exact regardless.
    pub counts_estimated: bool,
    /// The newest scheduled time this decision accounts for: store it as the job's last
    /// scheduled fire, whether it ran or was skipped, so the next call does not see it again.
    pub seen_through: Option<DateTime<Utc>>,
}

/// Decides what to run for a job at `now`. `last_scheduled` is the newest scheduled time the
/// ledger has accounted for (run or skipped); before the first fire it is `None` and the
/// window starts at `anchor` (the job's creation), so a job never fires for times before it
/// existed: a one-shot whose time had passed when the job was created never runs.
pub fn due_fires(
    schedule: &Schedule,
    anchor: DateTime<Utc>,
    last_scheduled: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    policy: CatchUp,
) -> Due {
    let from = last_scheduled.unwrap_or(anchor);
    let Some(newest) = schedule
        .latest_at_or_before(now, anchor)
        .filter(|t| *t > from)
    else {
        return Due::default();
    };
    let on_time = now - newest <= ON_TIME_GRACE;
    let (total, counts_estimated) = count_fires(schedule, anchor, from, newest);
    let missed_count = if on_time { total - 1 } else { total };

    let (run, skipped_through) = match (on_time, policy) {
        (true, CatchUp::Once) | (false, CatchUp::Once) => (Some(newest), None),
        (true, CatchUp::Skip) => (Some(newest), schedule.latest_before(newest, anchor)),
        (false, CatchUp::Skip) => (None, Some(newest)),
    };
    let (skipped, skipped_count) = match skipped_through {
        Some(upto) if missed_count > 0 => {
            (newest_fires(schedule, anchor, from, upto), missed_count)
        }
        _ => (Vec::new(), 0),
    };
    Due {
        run,
        skipped,
        skipped_count,
        missed_count,
        counts_estimated,
        seen_through: Some(newest),
    }
}

/// Number of fires in `(from, newest]`, where `newest` is a fire; the bool says "estimated".
fn count_fires(
    schedule: &Schedule,
    anchor: DateTime<Utc>,
    from: DateTime<Utc>,
    newest: DateTime<Utc>,
) -> (usize, bool) {
    match schedule {
        Schedule::Once(_) => (1, false),
        Schedule::Every(every) => {
            let step = interval_ms(*every);
            let index = |t: DateTime<Utc>| (t - anchor).num_milliseconds() / step;
            // The first fire after `from` has index index(from) + 1, and never less than 1.
            let first = if from < anchor { 1 } else { index(from) + 1 };
            let count = index(newest) - first + 1;
            (usize::try_from(count.max(1)).unwrap_or(usize::MAX), false)
        }
        Schedule::Cron { .. } => {
            let mut cursor = from;
            for counted in 1..=CRON_COUNT_CAP {
                match schedule.next_after(cursor, anchor) {
                    Some(t) if t < newest => cursor = t,
                    _ => return (counted, false),
                }
            }
            // Past the cap, scale by the spacing seen so far; at least one more than counted.
            let seen = (cursor - from).num_seconds().max(1) as f64;
            let span = (newest - from).num_seconds() as f64;
            let estimate = (CRON_COUNT_CAP as f64 * span / seen).round() as usize;
            (estimate.max(CRON_COUNT_CAP + 1), true)
        }
    }
}

/// The newest fires in `(from, upto]` (`upto` is a fire), at most [`SKIPPED_LIST_CAP`],
/// oldest first. Walks backwards, so the cost is bounded by the cap, not the window.
fn newest_fires(
    schedule: &Schedule,
    anchor: DateTime<Utc>,
    from: DateTime<Utc>,
    upto: DateTime<Utc>,
) -> Vec<DateTime<Utc>> {
    let mut fires = Vec::new();
    let mut cursor = Some(upto);
    while let Some(t) = cursor.filter(|t| *t > from) {
        fires.push(t);
        if fires.len() == SKIPPED_LIST_CAP {
            break;
        }
        cursor = schedule.latest_before(t, anchor);
    }
    fires.reverse();
    fires
}

#[cfg(test)]
#[path = "catchup_tests.rs"]
mod tests;
