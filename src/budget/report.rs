//! Spending summed for reading: the ledger's settled rows grouped by person, agent, lane, cron
//! job, model or day, each group with its cost (unknown as soon as one call had no price), its calls
//! and its four token buckets. `herald usage` prints it; the admin page charts it by day.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use serde::Serialize;

use super::Period;
use crate::domain::Amount;
use crate::store::SpendRow;

/// What rows are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    Person,
    Agent,
    Lane,
    Job,
    Model,
    Day,
}

/// One group's sums.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Group {
    /// The payer (a person or `system`), lane, job, model or day; `None`: rows without one (a
    /// conversation has no job; a row written before payers were recorded has no payer).
    pub key: Option<String>,
    /// `None` when any call of the group had no price.
    pub cost: Option<Amount>,
    /// What the calls with a known price cost.
    pub known_cost: Amount,
    /// Calls billed in a bucket without a rate.
    pub unknown_calls: u64,
    pub calls: u64,
    pub fresh_input: i64,
    pub output: i64,
    pub cache_read: i64,
    pub cache_write: i64,
}

/// Settled rows grouped by `by`, in key order (calls still in flight are left out).
pub fn group(rows: &[SpendRow], by: By) -> Vec<Group> {
    let mut groups: BTreeMap<Option<String>, Group> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.state == "settled") {
        let key = match by {
            By::Person => row.payer().map(|p| p.to_string()),
            By::Agent => Some(row.agent.clone()),
            By::Lane => Some(row.lane.clone()),
            By::Job => row.job.clone(),
            By::Model => Some(row.model.clone()),
            By::Day => Some(row.day.clone()),
        };
        let g = groups.entry(key.clone()).or_insert_with(|| Group {
            key,
            cost: Some(Amount(0)),
            ..Group::default()
        });
        match row.cost {
            Some(c) => {
                g.known_cost.0 += c;
                g.cost = g.cost.map(|t| Amount(t.0 + c));
            }
            None => {
                g.unknown_calls += 1;
                g.cost = None;
            }
        }
        g.calls += 1;
        g.fresh_input += row.fresh_input;
        g.output += row.output;
        g.cache_read += row.cache_read;
        g.cache_write += row.cache_write;
    }
    groups.into_values().collect()
}

/// A `--since` value as epoch ms: a day (`2026-12-01`, from its start in `tz`) or a count of
/// days (`7d`: today and the six days before it).
pub fn since_ms(spec: &str, tz: Tz, now: DateTime<Utc>) -> Option<i64> {
    if let Some(n) = spec.strip_suffix('d').and_then(|n| n.parse::<i64>().ok()) {
        if !(1..=3660).contains(&n) {
            return None;
        }
        let day = now.with_timezone(&tz).date_naive() - Duration::days(n - 1);
        return Period::day_start_ms(&day.format("%Y-%m-%d").to_string(), tz);
    }
    Period::day_start_ms(spec, tz)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn row(person: Option<&str>, day: &str, cost: Option<i64>, output: i64) -> SpendRow {
        SpendRow {
            at: 0,
            day: day.into(),
            lane: "web:a".into(),
            agent: "default".into(),
            person: person.map(Into::into),
            payer: Some(if person.is_some() { "person" } else { "system" }.into()),
            job: None,
            cause: "turn".into(),
            model: "m".into(),
            state: "settled".into(),
            held: 99,
            cost,
            fresh_input: 1,
            output,
            cache_read: 0,
            cache_write: 0,
        }
    }

    #[test]
    fn an_unpriced_call_makes_its_group_unknown_not_smaller() {
        let rows = [
            row(Some("ann"), "2026-12-01", Some(10), 5),
            row(Some("ann"), "2026-12-02", None, 7),
            row(Some("bob"), "2026-12-02", Some(3), 1),
            row(None, "2026-12-02", Some(4), 1),
            SpendRow {
                payer: None,
                ..row(None, "2026-12-02", Some(5), 1)
            },
            SpendRow {
                state: "held".into(),
                ..row(Some("bob"), "2026-12-02", None, 0)
            },
        ];
        let by_person = group(&rows, By::Person);
        let keys: Vec<_> = by_person.iter().map(|g| g.key.as_deref()).collect();
        // A row from before payers were recorded reads as none; the system pays by name.
        assert_eq!(keys, [None, Some("ann"), Some("bob"), Some("system")]);
        let ann = &by_person[1];
        assert_eq!(
            (ann.cost, ann.known_cost, ann.unknown_calls),
            (None, Amount(10), 1)
        );
        assert_eq!((ann.calls, ann.output), (2, 12));
        let bob = &by_person[2];
        assert_eq!((bob.cost, bob.calls), (Some(Amount(3)), 1));
        let by_agent = group(
            &[
                row(Some("ann"), "2026-12-01", Some(10), 5),
                SpendRow {
                    agent: "coder".into(),
                    ..row(Some("ann"), "2026-12-01", Some(4), 1)
                },
                SpendRow {
                    agent: "coder".into(),
                    ..row(Some("bob"), "2026-12-01", Some(2), 1)
                },
            ],
            By::Agent,
        );
        let agents: Vec<_> = by_agent
            .iter()
            .map(|g| (g.key.as_deref(), g.cost, g.calls))
            .collect();
        assert_eq!(
            agents,
            [
                (Some("coder"), Some(Amount(6)), 2),
                (Some("default"), Some(Amount(10)), 1)
            ]
        );
        let by_day = group(&rows, By::Day);
        assert_eq!(by_day[0].key.as_deref(), Some("2026-12-01"));
        assert_eq!(by_day[1].cost, None);
    }

    #[test]
    fn since_reads_days_and_day_counts() {
        let now = Utc.with_ymd_and_hms(2026, 12, 10, 12, 0, 0).unwrap();
        let tz = chrono_tz::UTC;
        let day = |d: u32| Utc.with_ymd_and_hms(2026, 12, d, 0, 0, 0).unwrap();
        assert_eq!(since_ms("7d", tz, now), Some(day(4).timestamp_millis()));
        assert_eq!(since_ms("1d", tz, now), Some(day(10).timestamp_millis()));
        assert_eq!(
            since_ms("2026-12-01", tz, now),
            Some(day(1).timestamp_millis())
        );
        assert_eq!(since_ms("0d", tz, now), None);
        assert_eq!(since_ms("yesterday", tz, now), None);
    }
}
