//! Table tests for catch-up decisions after downtime (`once`, `skip`), bounded for long outages.

use std::time::{Duration, Instant};

use super::*;
use crate::domain::cron::parse_schedule;

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .expect("test timestamp")
        .with_timezone(&Utc)
}

fn utcs(list: &[&str]) -> Vec<DateTime<Utc>> {
    list.iter().map(|s| utc(s)).collect()
}

#[test]
fn catch_up_parses_from_config_words() {
    for (input, want) in [
        ("skip", Ok(CatchUp::Skip)),
        ("once", Ok(CatchUp::Once)),
        (" Once ", Ok(CatchUp::Once)),
        (
            "all",
            Err("unknown catch_up policy \"all\" (expected \"skip\" or \"once\")"),
        ),
        (
            "",
            Err("unknown catch_up policy \"\" (expected \"skip\" or \"once\")"),
        ),
    ] {
        let got = input.parse::<CatchUp>().map_err(|e| e.to_string());
        assert_eq!(got, want.map_err(str::to_string), "{input:?}");
    }
}

/// One row per situation: a daily 07:00 UTC job created on 2026-06-01.
#[test]
fn daily_job_decision_table() {
    let s = parse_schedule("0 7 * * *", None).expect("valid");
    let anchor = utc("2026-06-01T00:00:00Z");
    struct Row {
        what: &'static str,
        last: Option<&'static str>,
        now: &'static str,
        policy: CatchUp,
        run: Option<&'static str>,
        skipped: &'static [&'static str],
        missed: usize,
    }
    let rows = [
        Row {
            what: "before the first fire",
            last: None,
            now: "2026-06-01T06:59:59Z",
            policy: CatchUp::Once,
            run: None,
            skipped: &[],
            missed: 0,
        },
        Row {
            what: "on time",
            last: None,
            now: "2026-06-01T07:00:00Z",
            policy: CatchUp::Skip,
            run: Some("2026-06-01T07:00:00Z"),
            skipped: &[],
            missed: 0,
        },
        Row {
            what: "within the grace",
            last: Some("2026-06-01T07:00:00Z"),
            now: "2026-06-02T07:01:00Z",
            policy: CatchUp::Skip,
            run: Some("2026-06-02T07:00:00Z"),
            skipped: &[],
            missed: 0,
        },
        Row {
            what: "already run: nothing again",
            last: Some("2026-06-02T07:00:00Z"),
            now: "2026-06-02T07:00:30Z",
            policy: CatchUp::Once,
            run: None,
            skipped: &[],
            missed: 0,
        },
        Row {
            what: "just past the grace, skip",
            last: Some("2026-06-01T07:00:00Z"),
            now: "2026-06-02T07:01:01Z",
            policy: CatchUp::Skip,
            run: None,
            skipped: &["2026-06-02T07:00:00Z"],
            missed: 1,
        },
        Row {
            what: "just past the grace, once",
            last: Some("2026-06-01T07:00:00Z"),
            now: "2026-06-02T07:01:01Z",
            policy: CatchUp::Once,
            run: Some("2026-06-02T07:00:00Z"),
            skipped: &[],
            missed: 1,
        },
        Row {
            what: "back exactly at a fire after two missed, skip: runs it, skips the two",
            last: Some("2026-06-01T07:00:00Z"),
            now: "2026-06-04T07:00:10Z",
            policy: CatchUp::Skip,
            run: Some("2026-06-04T07:00:00Z"),
            skipped: &["2026-06-02T07:00:00Z", "2026-06-03T07:00:00Z"],
            missed: 2,
        },
        Row {
            what: "back exactly at a fire after two missed, once: one run",
            last: Some("2026-06-01T07:00:00Z"),
            now: "2026-06-04T07:00:10Z",
            policy: CatchUp::Once,
            run: Some("2026-06-04T07:00:00Z"),
            skipped: &[],
            missed: 2,
        },
    ];
    for row in rows {
        let due = due_fires(&s, anchor, row.last.map(utc), utc(row.now), row.policy);
        assert_eq!(due.run, row.run.map(utc), "{}", row.what);
        assert_eq!(due.skipped, utcs(row.skipped), "{}", row.what);
        assert_eq!(due.skipped_count, row.skipped.len(), "{}", row.what);
        assert_eq!(due.missed_count, row.missed, "{}", row.what);
        assert!(!due.counts_estimated, "{}", row.what);
        let newest = due.run.or(due.skipped.last().copied());
        if newest.is_some() {
            assert_eq!(due.seen_through, newest, "{}", row.what);
        }
    }
}

/// The daemon was down across three 07:00 fires and comes back at 09:00 on the third day.
#[test]
fn three_missed_fires_run_once_or_not_at_all() {
    let s = parse_schedule("0 7 * * *", None).expect("valid");
    let anchor = utc("2026-06-01T00:00:00Z");
    let last = Some(utc("2026-06-01T07:00:00Z"));
    let now = utc("2026-06-04T09:00:00Z");
    let missed = utcs(&[
        "2026-06-02T07:00:00Z",
        "2026-06-03T07:00:00Z",
        "2026-06-04T07:00:00Z",
    ]);

    let once = due_fires(&s, anchor, last, now, CatchUp::Once);
    assert_eq!(
        once.run,
        Some(missed[2]),
        "once runs the newest missed time"
    );
    assert_eq!(once.missed_count, 3);
    assert!(once.skipped.is_empty());
    assert_eq!(once.seen_through, Some(missed[2]));

    let skip = due_fires(&s, anchor, last, now, CatchUp::Skip);
    assert_eq!(skip.run, None);
    assert_eq!(skip.skipped, missed);
    assert_eq!((skip.skipped_count, skip.missed_count), (3, 3));
    assert_eq!(skip.seen_through, Some(missed[2]));

    // Once the ledger stores `seen_through`, the same instant decides nothing more.
    for policy in [CatchUp::Once, CatchUp::Skip] {
        let again = due_fires(&s, anchor, Some(missed[2]), now, policy);
        assert_eq!(again, Due::default(), "{policy:?}");
    }
}

#[test]
fn intervals_count_missed_fires_arithmetically() {
    let s = parse_schedule("every 30m", None).expect("valid");
    let anchor = utc("2026-06-01T10:00:00Z");
    // Fires at 10:30 .. 12:30 (5 of them), checked at 12:45: all late.
    let skip = due_fires(&s, anchor, None, utc("2026-06-01T12:45:00Z"), CatchUp::Skip);
    assert_eq!(skip.run, None);
    assert_eq!((skip.skipped_count, skip.missed_count), (5, 5));
    assert_eq!(skip.skipped.first(), Some(&utc("2026-06-01T10:30:00Z")));
    assert_eq!(skip.seen_through, Some(utc("2026-06-01T12:30:00Z")));
    // Resuming from the 11:00 fire leaves 11:30, 12:00 and 12:30.
    let once = due_fires(
        &s,
        anchor,
        Some(utc("2026-06-01T11:00:00Z")),
        utc("2026-06-01T12:45:00Z"),
        CatchUp::Once,
    );
    assert_eq!(once.run, Some(utc("2026-06-01T12:30:00Z")));
    assert_eq!(once.missed_count, 3);
}

#[test]
fn one_shot_runs_once_and_never_for_a_time_before_the_job_existed() {
    let at = utc("2026-12-01T07:00:00Z");
    let s = parse_schedule("at 2026-12-01T07:00:00Z", None).expect("valid");
    let anchor = utc("2026-11-01T00:00:00Z");
    let late = utc("2026-12-03T00:00:00Z");
    let due = due_fires(&s, anchor, None, late, CatchUp::Once);
    assert_eq!((due.run, due.missed_count), (Some(at), 1));
    let skip = due_fires(&s, anchor, None, late, CatchUp::Skip);
    assert_eq!((skip.run, skip.skipped.as_slice()), (None, &[at][..]));
    assert_eq!(
        due_fires(&s, anchor, Some(at), late, CatchUp::Once),
        Due::default()
    );
    let created_after = utc("2026-12-02T00:00:00Z");
    assert_eq!(
        due_fires(&s, created_after, None, late, CatchUp::Once),
        Due::default()
    );
}

/// `every 1s`, down for a year: 31.5 million missed fires, decided without walking them.
#[test]
fn year_long_downtime_on_every_second_is_bounded() {
    let s = parse_schedule("every 1s", None).expect("valid");
    let anchor = utc("2025-06-01T00:00:00Z");
    let last = Some(utc("2025-06-01T00:00:10Z"));
    let now = utc("2026-06-01T00:00:10.5Z");
    let started = Instant::now();
    let skip = due_fires(&s, anchor, last, now, CatchUp::Skip);
    let once = due_fires(&s, anchor, last, now, CatchUp::Once);
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(100), "took {elapsed:?}");
    // The fire at `now` - 0.5 s is on time; the 365 days before it were missed.
    let year = 365 * 24 * 3600;
    assert_eq!(once.run, Some(utc("2026-06-01T00:00:10Z")));
    assert_eq!(once.missed_count, year - 1);
    assert_eq!(skip.run, once.run);
    assert_eq!(skip.skipped_count, year - 1);
    assert_eq!(skip.skipped.len(), SKIPPED_LIST_CAP);
    assert_eq!(skip.skipped.last(), Some(&utc("2026-06-01T00:00:09Z")));
    assert!(!skip.counts_estimated);
}

/// A minutely cron job down for a year: the count is estimated past the cap, the decision
/// stays exact and quick. Back at 00:05:30, the 00:05 fire is on time and runs.
#[test]
fn year_long_downtime_on_minutely_cron_is_bounded() {
    let s = parse_schedule("* * * * *", None).expect("valid");
    let anchor = utc("2025-06-01T00:00:00Z");
    let now = utc("2026-06-01T00:05:30Z");
    let started = Instant::now();
    let skip = due_fires(&s, anchor, None, now, CatchUp::Skip);
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
    assert_eq!(skip.run, Some(utc("2026-06-01T00:05:00Z")));
    assert_eq!(skip.seen_through, skip.run);
    assert_eq!(skip.skipped.len(), SKIPPED_LIST_CAP);
    assert_eq!(skip.skipped.last(), Some(&utc("2026-06-01T00:04:00Z")));
    assert!(skip.counts_estimated);
    let missed = 365 * 24 * 60 + 4;
    assert_eq!(skip.missed_count, skip.skipped_count);
    let off = skip.skipped_count.abs_diff(missed);
    assert!(
        off <= missed / 100,
        "estimate {} vs {missed}",
        skip.skipped_count
    );
    eprintln!(
        "minutely cron, one year down: {elapsed:?}, estimate {}",
        skip.skipped_count
    );
}

/// A catch-up check during Berlin's repeated 02:00–03:00 hour must not run the day's
/// 02:30 job a second time.
#[test]
fn fall_back_overlap_does_not_refire() {
    let s = parse_schedule("30 2 * * *", Some("Europe/Berlin")).expect("valid");
    let anchor = utc("2026-10-01T00:00:00Z");
    let first = utc("2026-10-25T00:30:00Z");
    for now in [
        "2026-10-25T01:30:00Z",
        "2026-10-25T01:31:00Z",
        "2026-10-25T05:00:00Z",
    ] {
        let due = due_fires(&s, anchor, Some(first), utc(now), CatchUp::Once);
        assert_eq!(due, Due::default(), "at {now}");
    }
}
