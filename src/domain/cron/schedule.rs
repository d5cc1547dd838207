//! When a cron job fires: parsing the `schedule` string of a job and computing its next fire.
//!
//! Pure time arithmetic over explicit instants; it never reads the clock, so every rule here
//! is testable with fixed dates. Cron expressions are parsed and walked by `croner`, which
//! follows the OCPS/Vixie rules across daylight-saving changes (see [`Schedule::next_after`]).
//! This module must not know about the ledger, the store or delivery.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

/// Shortest interval accepted by `every`: anything shorter is a busy loop, not a schedule.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Longest interval accepted by `every`; a longer one is almost surely a typo, and a one-shot
/// timestamp says it better.
pub const MAX_INTERVAL: Duration = Duration::from_secs(366 * 24 * 3600);

/// A parsed `schedule`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// A five-field cron expression, read on the wall clock of `tz`.
    Cron { expr: CronExpr, tz: Tz },
    /// Every fixed interval, counted from the job's anchor (never from the last run, so a slow
    /// run does not make the schedule drift).
    Every(Duration),
    /// Exactly once, at this instant.
    Once(DateTime<Utc>),
}

/// A cron expression kept both as the operator wrote it and parsed, so it is parsed once.
/// The parsed form is boxed: it is a few hundred bytes and would bloat every `Schedule`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    source: String,
    cron: Box<Cron>,
}

impl CronExpr {
    pub fn as_str(&self) -> &str {
        &self.source
    }
}

impl std::fmt::Display for CronExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.source)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "empty schedule: expected a cron expression, \"every <n><s|m|h|d>\" or an RFC 3339 time"
    )]
    Empty,
    #[error("invalid cron expression {expr:?}: {reason}")]
    InvalidCron { expr: String, reason: String },
    #[error("invalid interval {spec:?}: {reason}")]
    InvalidInterval { spec: String, reason: String },
    #[error("invalid timestamp {spec:?}: {reason}")]
    InvalidTimestamp { spec: String, reason: String },
    #[error("unknown time zone {0:?} (use an IANA name such as \"Europe/Berlin\" or \"UTC\")")]
    UnknownTimeZone(String),
}

/// Parses a job's `schedule` string. `timezone` (an IANA name) is the wall clock of cron
/// expressions; it defaults to UTC and does not affect intervals or timestamps, which name
/// instants already. An unknown zone is an error whatever the schedule kind, so a typo
/// never goes unnoticed until the job is edited.
///
/// Accepted: `0 7 * * 1-5` (five fields, or an `@daily`-style nickname), `every 30s`,
/// `every 15m`, `every 2h`, `every 1d`, `2026-12-01T07:00:00Z`, `at 2026-12-01T09:00:00+02:00`.
pub fn parse_schedule(spec: &str, timezone: Option<&str>) -> Result<Schedule, ScheduleError> {
    let tz = match timezone.map(str::trim) {
        None | Some("") => Tz::UTC,
        Some(name) => name
            .parse::<Tz>()
            .map_err(|_| ScheduleError::UnknownTimeZone(name.to_string()))?,
    };
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(ScheduleError::Empty);
    }
    let lower = spec.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("every") {
        return parse_interval(spec, rest.trim()).map(Schedule::Every);
    }
    if let Some(rest) = lower.strip_prefix("at ") {
        return parse_timestamp(spec, spec[spec.len() - rest.len()..].trim()).map(Schedule::Once);
    }
    // A single token with a date-time shape is meant as a timestamp; give its error, not a
    // confusing cron one.
    let single_token = !spec.contains(char::is_whitespace);
    let date_like = spec.starts_with(|c: char| c.is_ascii_digit()) && spec.contains('-');
    if single_token && (spec.contains(':') || date_like) {
        return parse_timestamp(spec, spec).map(Schedule::Once);
    }
    parse_cron(spec, tz)
}

fn parse_cron(spec: &str, tz: Tz) -> Result<Schedule, ScheduleError> {
    let invalid = |reason: String| ScheduleError::InvalidCron {
        expr: spec.to_string(),
        reason,
    };
    let fields = spec.split_whitespace().count();
    if !spec.starts_with('@') && fields != 5 {
        return Err(invalid(format!(
            "expected 5 fields (minute hour day-of-month month day-of-week), found {fields}"
        )));
    }
    let cron = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(spec)
        .map_err(|e| invalid(e.to_string()))?;
    // `0 0 30 2 *` parses but never fires; say so now rather than let the job sit silent.
    let probe = tz.from_utc_datetime(&DateTime::UNIX_EPOCH.naive_utc());
    if cron.find_next_occurrence(&probe, false).is_err() {
        return Err(invalid("it never fires".to_string()));
    }
    Ok(Schedule::Cron {
        expr: CronExpr {
            source: spec.to_string(),
            cron: Box::new(cron),
        },
        tz,
    })
}

fn parse_interval(spec: &str, rest: &str) -> Result<Duration, ScheduleError> {
    let invalid = |reason: &str| ScheduleError::InvalidInterval {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let digits_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (number, unit) = rest.split_at(digits_end);
    if number.is_empty() {
        return Err(invalid("expected a number and a unit, e.g. \"every 30m\""));
    }
    let unit_secs: u64 = match unit.trim() {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "" => return Err(invalid("missing unit: use s, m, h or d")),
        _ => return Err(invalid("unknown unit: use s, m, h or d")),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| invalid("the number is too large"))?;
    if n == 0 {
        return Err(invalid("the interval must be longer than zero"));
    }
    let secs = n
        .checked_mul(unit_secs)
        .filter(|s| *s <= MAX_INTERVAL.as_secs())
        .ok_or_else(|| invalid("the interval is longer than 366 days"))?;
    Ok(Duration::from_secs(secs))
}

fn parse_timestamp(spec: &str, ts: &str) -> Result<DateTime<Utc>, ScheduleError> {
    DateTime::parse_from_rfc3339(ts)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| ScheduleError::InvalidTimestamp {
            spec: spec.to_string(),
            reason: format!("{e} (expected RFC 3339 with a UTC offset, e.g. 2026-12-01T07:00:00Z)"),
        })
}

impl Schedule {
    /// The first fire strictly after `t`, or `None` when there is none (a one-shot that has
    /// passed, or a cron walk past year 5000).
    ///
    /// Intervals fire at `anchor + k·interval` for k ≥ 1: the anchor (the job's creation) is
    /// not itself a fire. Cron expressions follow croner's daylight-saving rule: a fixed-time
    /// job (`30 2 * * *`) whose wall-clock time falls in a spring-forward gap runs at the
    /// first instant after the gap, and in a fall-back overlap runs once, at the first of the
    /// two instants; wildcard/step fields skip times in the gap and run in both passes of
    /// the overlap.
    pub fn next_after(&self, t: DateTime<Utc>, anchor: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron { expr, tz } => expr
                .cron
                .find_next_occurrence(&t.with_timezone(tz), false)
                .ok()
                .map(|local| local.with_timezone(&Utc)),
            Schedule::Every(every) => {
                let step = interval_ms(*every);
                let elapsed = (t - anchor).num_milliseconds();
                let k = if elapsed < 0 { 1 } else { elapsed / step + 1 };
                interval_fire(anchor, step, k)
            }
            Schedule::Once(at) => (*at > t).then_some(*at),
        }
    }

    /// The newest fire at or before `t`, or `None` when nothing has fired by then.
    pub fn latest_at_or_before(
        &self,
        t: DateTime<Utc>,
        anchor: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron { expr, tz } => expr
                .cron
                .find_previous_occurrence(&t.with_timezone(tz), true)
                .ok()
                .map(|local| local.with_timezone(&Utc)),
            Schedule::Every(every) => {
                let step = interval_ms(*every);
                let k = (t - anchor).num_milliseconds() / step;
                (k >= 1).then(|| interval_fire(anchor, step, k)).flatten()
            }
            Schedule::Once(at) => (*at <= t).then_some(*at),
        }
    }

    /// The newest fire strictly before `t`; used to walk a cron schedule backwards.
    pub(crate) fn latest_before(
        &self,
        t: DateTime<Utc>,
        anchor: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron { expr, tz } => expr
                .cron
                .find_previous_occurrence(&t.with_timezone(tz), false)
                .ok()
                .map(|local| local.with_timezone(&Utc)),
            _ => self.latest_at_or_before(t - TimeDelta::nanoseconds(1), anchor),
        }
    }
}

/// Interval length in milliseconds; at least 1 so a hand-built `Every(ZERO)` cannot divide by
/// zero (the parser never builds one).
pub(crate) fn interval_ms(every: Duration) -> i64 {
    i64::try_from(every.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// `anchor + k·step`, `None` on overflow.
pub(crate) fn interval_fire(anchor: DateTime<Utc>, step_ms: i64, k: i64) -> Option<DateTime<Utc>> {
    let offset = TimeDelta::try_milliseconds(step_ms.checked_mul(k)?)?;
    anchor.checked_add_signed(offset)
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
