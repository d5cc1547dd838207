//! Table tests for schedule parsing and next-fire computation, DST changes included.

use super::*;

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("test timestamp")
        .with_timezone(&Utc)
}

fn cron(spec: &str, tz: &str) -> Schedule {
    parse_schedule(spec, Some(tz)).unwrap_or_else(|e| panic!("{spec:?}: {e}"))
}

/// The fires strictly after `start`, walked the way the scheduler walks them.
fn fires(schedule: &Schedule, start: &str, n: usize) -> Vec<String> {
    let anchor = utc(start);
    let mut t = anchor;
    let mut out = Vec::new();
    for _ in 0..n {
        t = schedule.next_after(t, anchor).expect("a next fire");
        out.push(t.to_rfc3339());
    }
    out
}

#[test]
fn parse_table_good() {
    let min = |m: u64| Schedule::Every(Duration::from_secs(m * 60));
    let cases: &[(&str, Option<&str>, Schedule)] = &[
        ("every 30s", None, Schedule::Every(Duration::from_secs(30))),
        ("every 30m", None, min(30)),
        ("Every 2h", None, min(120)),
        ("every 1d", None, min(1440)),
        ("every 15 m", Some("Europe/Berlin"), min(15)),
        ("every 366d", None, Schedule::Every(MAX_INTERVAL)),
        (
            "2026-12-01T07:00:00Z",
            None,
            Schedule::Once(utc("2026-12-01T07:00:00Z")),
        ),
        (
            "at 2026-12-01T09:00:00+02:00",
            None,
            Schedule::Once(utc("2026-12-01T07:00:00Z")),
        ),
        (
            "  AT 2026-12-01T07:00:00.5Z ",
            None,
            Schedule::Once(utc("2026-12-01T07:00:00.5Z")),
        ),
    ];
    for (spec, tz, want) in cases {
        assert_eq!(parse_schedule(spec, *tz).as_ref(), Ok(want), "{spec:?}");
    }
    for (spec, tz) in [
        ("0 7 * * 1-5", "America/New_York"),
        ("*/15 * * * *", "UTC"),
        ("30 2 * * *", "Europe/Berlin"),
        ("0 9 1 JAN,jul MON", "Asia/Tokyo"),
        ("@daily", "UTC"),
    ] {
        match parse_schedule(spec, Some(tz)) {
            Ok(Schedule::Cron { expr, tz: zone }) => {
                assert_eq!(expr.as_str(), spec);
                assert_eq!(zone.name(), tz);
            }
            other => panic!("{spec:?}: {other:?}"),
        }
    }
    // Without a zone, cron reads the UTC wall clock.
    assert!(matches!(
        parse_schedule("0 7 * * *", None),
        Ok(Schedule::Cron { tz: Tz::UTC, .. })
    ));
}

#[test]
fn parse_table_bad() {
    let cases: &[(&str, Option<&str>, &str)] = &[
        ("", None, "empty schedule"),
        ("   ", None, "empty schedule"),
        ("0 7 * *", None, "invalid cron expression \"0 7 * *\": expected 5 fields (minute hour day-of-month month day-of-week), found 4"),
        ("0 0 7 * * *", None, "invalid cron expression \"0 0 7 * * *\": expected 5 fields"),
        ("61 7 * * *", None, "invalid cron expression \"61 7 * * *\": "),
        ("0 25 * * *", None, "invalid cron expression \"0 25 * * *\": "),
        ("0 7 * * funday", None, "invalid cron expression \"0 7 * * funday\": "),
        ("0 0 30 2 *", None, "invalid cron expression \"0 0 30 2 *\": it never fires"),
        ("hourly", None, "invalid cron expression \"hourly\": expected 5 fields"),
        ("0 7 * * *", Some("Mars/Olympus"), "unknown time zone \"Mars/Olympus\""),
        ("every 30m", Some("CEST"), "unknown time zone \"CEST\""),
        ("every 0s", None, "invalid interval \"every 0s\": the interval must be longer than zero"),
        ("every 0d", None, "must be longer than zero"),
        ("every 30", None, "invalid interval \"every 30\": missing unit: use s, m, h or d"),
        ("every 30w", None, "unknown unit: use s, m, h or d"),
        ("every 1.5h", None, "unknown unit"),
        ("every", None, "expected a number and a unit"),
        ("every -5m", None, "expected a number and a unit"),
        ("every 367d", None, "the interval is longer than 366 days"),
        ("every 99999999999999999999s", None, "the number is too large"),
        ("every 9999999999999999h", None, "the interval is longer than 366 days"),
        ("2026-12-01T07:00:00", None, "invalid timestamp \"2026-12-01T07:00:00\": "),
        ("2026-12-01T07:00:00", None, "expected RFC 3339 with a UTC offset"),
        ("2026-13-01T07:00:00Z", None, "invalid timestamp"),
        ("2026-12-01", None, "invalid timestamp \"2026-12-01\": "),
        ("at tomorrow", None, "invalid timestamp \"at tomorrow\""),
    ];
    for (spec, tz, want) in cases {
        let err = parse_schedule(spec, *tz).expect_err(spec).to_string();
        assert!(err.contains(want), "{spec:?}: got {err:?}, want {want:?}");
    }
}

#[test]
fn intervals_are_anchored_not_drifting() {
    let anchor = utc("2026-05-01T10:00:07Z");
    let every = parse_schedule("every 30m", None).expect("valid");
    let table: &[(&str, Option<&str>)] = &[
        // Before the anchor and at it: the first fire is one interval after creation.
        ("2026-04-01T00:00:00Z", Some("2026-05-01T10:30:07Z")),
        ("2026-05-01T10:00:07Z", Some("2026-05-01T10:30:07Z")),
        // A late check does not shift the grid.
        ("2026-05-01T10:41:00Z", Some("2026-05-01T11:00:07Z")),
        // Exactly on a fire: strictly after, so the following one.
        ("2026-05-01T11:00:07Z", Some("2026-05-01T11:30:07Z")),
        ("2027-05-01T10:00:06Z", Some("2027-05-01T10:00:07Z")),
    ];
    for (t, want) in table {
        let got = every.next_after(utc(t), anchor);
        assert_eq!(got, want.map(utc), "next after {t}");
    }
    assert_eq!(
        every.latest_at_or_before(utc("2026-05-01T10:29:00Z"), anchor),
        None
    );
    assert_eq!(
        every.latest_at_or_before(utc("2026-05-01T11:00:07Z"), anchor),
        Some(utc("2026-05-01T11:00:07Z"))
    );
    assert_eq!(
        every.latest_before(utc("2026-05-01T11:00:07Z"), anchor),
        Some(utc("2026-05-01T10:30:07Z"))
    );
}

#[test]
fn once_fires_only_before_it_passes() {
    let at = utc("2026-12-01T07:00:00Z");
    let once = parse_schedule("at 2026-12-01T07:00:00Z", None).expect("valid");
    let anchor = utc("2026-01-01T00:00:00Z");
    assert_eq!(
        once.next_after(utc("2026-11-30T00:00:00Z"), anchor),
        Some(at)
    );
    assert_eq!(once.next_after(at, anchor), None);
    assert_eq!(once.next_after(utc("2027-01-01T00:00:00Z"), anchor), None);
    assert_eq!(once.latest_at_or_before(at, anchor), Some(at));
    assert_eq!(
        once.latest_at_or_before(utc("2026-11-30T00:00:00Z"), anchor),
        None
    );
}

/// Europe/Berlin springs forward on 2026-03-29 (02:00 CET → 03:00 CEST): 02:30 does not
/// exist. Rule (croner, OCPS): a fixed-time job runs at the first instant after the gap,
/// 03:00 CEST = 01:00Z, so it still fires once that day.
#[test]
fn berlin_spring_forward_fires_once_after_the_gap() {
    let s = cron("30 2 * * *", "Europe/Berlin");
    assert_eq!(
        fires(&s, "2026-03-27T12:00:00Z", 4),
        [
            "2026-03-28T01:30:00+00:00", // 02:30 CET
            "2026-03-29T01:00:00+00:00", // 03:00 CEST, the first instant after the gap
            "2026-03-30T00:30:00+00:00", // 02:30 CEST
            "2026-03-31T00:30:00+00:00",
        ]
    );
}

/// Europe/Berlin falls back on 2026-10-25 (03:00 CEST → 02:00 CET): 02:30 happens twice.
/// Rule: a fixed-time job runs once, at the first of the two (02:30 CEST = 00:30Z).
#[test]
fn berlin_fall_back_fires_once_at_the_first_pass() {
    let s = cron("30 2 * * *", "Europe/Berlin");
    assert_eq!(
        fires(&s, "2026-10-23T12:00:00Z", 4),
        [
            "2026-10-24T00:30:00+00:00", // 02:30 CEST
            "2026-10-25T00:30:00+00:00", // first 02:30 (CEST); the CET one at 01:30Z is not a fire
            "2026-10-26T01:30:00+00:00", // 02:30 CET
            "2026-10-27T01:30:00+00:00",
        ]
    );
    // Walking backwards agrees with walking forwards: the second 02:30 is not a fire, so a
    // catch-up check during it cannot run the day's job twice.
    let anchor = utc("2026-10-01T00:00:00Z");
    assert_eq!(
        s.latest_at_or_before(utc("2026-10-25T01:30:30Z"), anchor),
        Some(utc("2026-10-25T00:30:00Z"))
    );
}

/// America/New_York leaves daylight time on 2026-11-01: 07:00 local is 11:00Z in EDT and
/// 12:00Z in EST. Weekdays only, so the weekend is skipped.
#[test]
fn new_york_weekday_brief_follows_the_wall_clock() {
    let s = cron("0 7 * * 1-5", "America/New_York");
    assert_eq!(
        fires(&s, "2026-10-29T12:00:00Z", 3),
        [
            "2026-10-30T11:00:00+00:00", // Friday, EDT
            "2026-11-02T12:00:00+00:00", // Monday, EST
            "2026-11-03T12:00:00+00:00",
        ]
    );
}

#[test]
fn interval_schedules_ignore_dst() {
    // `every 1d` is 24 hours of real time, not "same wall-clock time": across the Berlin
    // change the local time moves by an hour, which is what an interval means.
    let s = parse_schedule("every 1d", Some("Europe/Berlin")).expect("valid");
    assert_eq!(
        fires(&s, "2026-03-28T06:00:00Z", 2),
        ["2026-03-29T06:00:00+00:00", "2026-03-30T06:00:00+00:00"]
    );
}
