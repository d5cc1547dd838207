//! Budget periods: the day and the month a moment belongs to in the budget's timezone, and when
//! each ends (what the person is told when a cap resets).

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    /// `YYYY-MM-DD`.
    pub day: String,
    /// `YYYY-MM`.
    pub month: String,
    /// When the next day starts.
    pub day_ends: DateTime<Utc>,
    /// When the next month starts.
    pub month_ends: DateTime<Utc>,
}

impl Period {
    pub fn at(now: DateTime<Utc>, tz: Tz) -> Period {
        let local = now.with_timezone(&tz).date_naive();
        let next_day = local + Duration::days(1);
        let next_month = if local.month() == 12 {
            NaiveDate::from_ymd_opt(local.year() + 1, 1, 1)
        } else {
            NaiveDate::from_ymd_opt(local.year(), local.month() + 1, 1)
        }
        .unwrap_or(next_day);
        Period {
            day: local.format("%Y-%m-%d").to_string(),
            month: local.format("%Y-%m").to_string(),
            day_ends: start_of(next_day, tz),
            month_ends: start_of(next_month, tz),
        }
    }

    /// The period a day key (`YYYY-MM-DD`) starts, as epoch ms (`None`: not a day key).
    pub fn day_start_ms(day: &str, tz: Tz) -> Option<i64> {
        let d = NaiveDate::parse_from_str(day, "%Y-%m-%d").ok()?;
        Some(start_of(d, tz).timestamp_millis())
    }
}

/// The first moment of `day` in `tz` (a day that starts inside a DST gap starts when the clock
/// jumps).
fn start_of(day: NaiveDate, tz: Tz) -> DateTime<Utc> {
    let midnight = day.and_hms_opt(0, 0, 0).expect("midnight exists");
    match tz.from_local_datetime(&midnight) {
        chrono::LocalResult::Single(t) | chrono::LocalResult::Ambiguous(t, _) => {
            t.with_timezone(&Utc)
        }
        chrono::LocalResult::None => {
            let later = midnight + Duration::hours(1);
            tz.from_local_datetime(&later)
                .earliest()
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or_else(|| Utc.from_utc_datetime(&midnight))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_follow_the_budget_timezone() {
        let now = Utc.with_ymd_and_hms(2026, 12, 31, 23, 30, 0).unwrap();
        let utc = Period::at(now, chrono_tz::UTC);
        assert_eq!(
            (utc.day.as_str(), utc.month.as_str()),
            ("2026-12-31", "2026-12")
        );
        assert_eq!(
            utc.day_ends,
            Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()
        );
        assert_eq!(utc.month_ends, utc.day_ends);
        // Already the first of January in Berlin, which starts its next day at 23:00 UTC.
        let berlin = Period::at(now, chrono_tz::Europe::Berlin);
        assert_eq!(
            (berlin.day.as_str(), berlin.month.as_str()),
            ("2027-01-01", "2027-01")
        );
        assert_eq!(
            berlin.day_ends,
            Utc.with_ymd_and_hms(2027, 1, 1, 23, 0, 0).unwrap()
        );
        assert_eq!(
            Period::day_start_ms("2027-01-01", chrono_tz::Europe::Berlin),
            Some(
                Utc.with_ymd_and_hms(2026, 12, 31, 23, 0, 0)
                    .unwrap()
                    .timestamp_millis()
            )
        );
    }
}
