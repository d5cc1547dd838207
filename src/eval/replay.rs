//! `herald replay LANE --config other.toml`: a recorded conversation re-run against another
//! configuration, turn by turn, on a throwaway store (the recording is read from the live
//! store read-only), printing the recorded reply beside the new one with the tokens and cost
//! of each and their deltas.

use std::fmt::Write as _;

use chrono::Utc;

use super::case::Case;
use super::expect::exact;
use super::export::{case_file, recording, since_ms, Recorded};
use super::run::{run_case, Turn};
use super::sandbox::Sandbox;
use crate::cli::eval::ReplayArgs;
use crate::cli::{open_store, Access};
use crate::config::{Config, LoadOptions};
use crate::domain::Amount;
use crate::store::SpendRow;

/// The recorded side of one turn: the spend ledger's calls of the lane between this request
/// and the next.
#[derive(Debug, Default, Clone)]
struct Spent {
    input: u64,
    cost: Option<i64>,
}

pub async fn replay(config: &Config, args: ReplayArgs) -> anyhow::Result<()> {
    let since = since_ms(args.since.as_deref(), Utc::now())?;
    let live = match &args.store_config {
        Some(file) => crate::config::load(&LoadOptions {
            file: Some(file.clone()),
            data_dir: None,
            listen: None,
            use_env: true,
        })
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?,
        None => config.clone(),
    };
    let store = open_store(&live, "replay", Access::Read).await?;
    let read = async {
        let rec = recording(store.as_ref(), &args.lane, since).await?;
        let rows = store.spend_rows(since).await?;
        anyhow::Ok((rec, rows))
    }
    .await;
    store.close().await;
    let (rec, rows) = read?;
    let recorded = spent_per_turn(&rec.turns, &rows, &args.lane);
    let mut file = case_file(&rec, &args.lane, &live);
    let case: Case = file.cases.remove(0);
    let sandbox = Sandbox::new(config, &args.allow_tools).await?;
    let seen = run_case(&sandbox, &case).await?;
    print!(
        "{}",
        render(&rec.turns, &recorded, &seen.turns, &config.budget.currency)
    );
    Ok(())
}

/// The ledger rows of `lane` assigned to their turn: a turn's calls are made before its
/// messages land, so a row belongs to the first turn recorded at or after it.
fn spent_per_turn(turns: &[Recorded], rows: &[SpendRow], lane: &str) -> Vec<Spent> {
    let mut out = vec![
        Spent {
            input: 0,
            cost: Some(0)
        };
        turns.len()
    ];
    for r in rows.iter().filter(|r| r.lane == lane) {
        let Some(i) = turns.iter().position(|t| t.at >= r.at) else {
            continue;
        };
        out[i].input += (r.fresh_input + r.cache_read + r.cache_write).max(0) as u64;
        out[i].cost = out[i].cost.zip(r.cost).map(|(a, b)| a + b);
    }
    out
}

fn money(c: Option<i64>, currency: &str) -> String {
    c.map_or("?".into(), |c| exact(Amount(c), currency))
}

fn render(turns: &[Recorded], old: &[Spent], new: &[Turn], currency: &str) -> String {
    let mut out = String::new();
    let (mut old_in, mut new_in) = (0u64, 0u64);
    let (mut old_cost, mut new_cost) = (Some(0i64), Some(0i64));
    for (i, t) in turns.iter().enumerate() {
        let (o, n) = (&old[i], new.get(i).cloned().unwrap_or_default());
        let _ = writeln!(out, "── turn {} ──", i + 1);
        let _ = writeln!(out, "person:   {}", t.text);
        let _ = writeln!(out, "recorded: {}", t.reply);
        let _ = writeln!(out, "new:      {}", n.reply);
        let _ = writeln!(
            out,
            "tokens in {} → {} ({:+}), cost {} → {}{}",
            o.input,
            n.input_tokens,
            n.input_tokens as i64 - o.input as i64,
            money(o.cost, currency),
            money(n.cost, currency),
            match (o.cost, n.cost) {
                (Some(a), Some(b)) => format!(" ({})", signed(b - a, currency)),
                _ => String::new(),
            }
        );
        old_in += o.input;
        new_in += n.input_tokens;
        old_cost = old_cost.zip(o.cost).map(|(a, b)| a + b);
        new_cost = new_cost.zip(n.cost).map(|(a, b)| a + b);
    }
    let _ = writeln!(
        out,
        "total: tokens in {old_in} → {new_in} ({:+}), cost {} → {}",
        new_in as i64 - old_in as i64,
        money(old_cost, currency),
        money(new_cost, currency)
    );
    out
}

fn signed(d: i64, currency: &str) -> String {
    let sign = if d < 0 { "-" } else { "+" };
    format!("{sign}{}", exact(Amount(d.abs()), currency))
}
