//! `herald usage`: what was spent, grouped by person, agent, lane, cron job, model or day, as a table
//! or as JSON — read from the spend ledger through a read-only store.

use anyhow::Context;
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::budget::report::{group, since_ms, By, Group};
use crate::budget::Period;
use crate::config::Config;
use crate::store::Store;

#[derive(clap::Args, Debug, Clone)]
pub struct UsageArgs {
    /// What to group by.
    #[arg(long, value_enum, default_value = "day")]
    pub by: By,
    /// From this day (`2026-12-01`) or this many days back (`7d`: today and the six before);
    /// default: the start of this month. Days follow `budget.timezone`.
    #[arg(long)]
    pub since: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `herald usage` against the configured store.
pub async fn usage(config: &Config, args: UsageArgs) -> anyhow::Result<()> {
    let since = since(config, &args, Utc::now())?;
    let store = super::open_store(config, "usage", super::Access::Read).await?;
    let out = report(store.as_ref(), config, &args, since).await;
    store.close().await;
    print!("{}", out?);
    Ok(())
}

/// Where the report starts (epoch ms).
pub fn since(config: &Config, args: &UsageArgs, now: DateTime<Utc>) -> anyhow::Result<i64> {
    let tz = config.budget.timezone.parse().unwrap_or(chrono_tz::UTC);
    match &args.since {
        Some(s) => since_ms(s, tz, now).with_context(|| {
            format!("--since {s:?}: use a day like 2026-12-01 or a number of days like 7d")
        }),
        None => {
            let month = Period::at(now, tz).month;
            Ok(Period::day_start_ms(&format!("{month}-01"), tz).unwrap_or(0))
        }
    }
}

/// The report's text (tests call this directly).
pub async fn report(
    store: &dyn Store,
    config: &Config,
    args: &UsageArgs,
    since: i64,
) -> anyhow::Result<String> {
    let rows = store.spend_rows(since).await?;
    let groups = group(&rows, args.by);
    let currency = &config.budget.currency;
    if args.json {
        let list: Vec<_> = groups
            .iter()
            .map(|g| {
                json!({
                    "key": g.key,
                    "cost": g.cost,
                    "known_cost": g.known_cost,
                    "unknown_calls": g.unknown_calls,
                    "calls": g.calls,
                    "fresh_input": g.fresh_input,
                    "output": g.output,
                    "cache_read": g.cache_read,
                    "cache_write": g.cache_write,
                })
            })
            .collect();
        let by = format!("{:?}", args.by).to_lowercase();
        return Ok(format!(
            "{}\n",
            json!({ "by": by, "since": since, "currency": currency, "groups": list })
        ));
    }
    Ok(table(&groups, args.by, currency))
}

fn table(groups: &[Group], by: By, currency: &str) -> String {
    if groups.is_empty() {
        return "no spending in this period\n".into();
    }
    let head = format!("{by:?}").to_lowercase();
    let mut rows = vec![[
        head,
        "cost".into(),
        "calls".into(),
        "input".into(),
        "output".into(),
        "cache read".into(),
        "cache write".into(),
    ]];
    for g in groups {
        let cost = match g.cost {
            Some(c) => c.in_currency(currency),
            None => format!(
                "unknown ({} + {} unpriced call(s))",
                g.known_cost.in_currency(currency),
                g.unknown_calls
            ),
        };
        rows.push([
            g.key.clone().unwrap_or_else(|| "-".into()),
            cost,
            g.calls.to_string(),
            g.fresh_input.to_string(),
            g.output.to_string(),
            g.cache_read.to_string(),
            g.cache_write.to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| match i {
                0 => format!("{c:<w$}", w = widths[i]),
                _ => format!("{c:>w$}", w = widths[i]),
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}
