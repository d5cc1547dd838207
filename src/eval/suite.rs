//! A suite: every case of the case files, each run `repeat` times on its own throwaway Herald,
//! `jobs` at once, with a progress bar on a terminal's stderr; each run checked against its
//! case's expectations (and the judge), then folded into one result per case.

use futures::StreamExt;
use serde::Serialize;

use super::case::Loaded;
use super::expect::failures;
use super::judge::Judge;
use super::run::{run_case, Observed};
use super::sandbox::Sandbox;
use crate::domain::Amount;

/// One case's outcome over its runs.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub name: String,
    pub file: String,
    /// Every run passed.
    pub passed: bool,
    /// Why the first failing run failed; empty when all passed.
    pub reason: String,
    pub runs: u32,
    pub passes: u32,
    pub pass_rate: f64,
    /// Means over the runs.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// In the budget's currency; `None` when a call had no price.
    pub cost: Option<f64>,
    pub latency_ms: u64,
    /// The last message's reply in the last run.
    pub reply: String,
}

/// What one run of one case gave.
struct RunOutcome {
    seen: Option<Observed>,
    why: Vec<String>,
}

/// Runs every case of `cases` `repeat` times, `jobs` runs at once, in suite order.
pub async fn run_suite(
    sandbox: &Sandbox,
    cases: &[Loaded],
    repeat: u32,
    jobs: usize,
    label: &str,
) -> anyhow::Result<Vec<CaseResult>> {
    let judge = match cases.iter().any(|c| c.case.expect.judge.is_some()) {
        true => Some(Judge::new(&sandbox.config)?),
        false => None,
    };
    let repeat = repeat.max(1);
    let bar = crate::cli::progress::bar((cases.len() as u64) * repeat as u64, label);
    let runs = (0..cases.len()).flat_map(|i| (0..repeat).map(move |_| i));
    let mut outcomes: Vec<(usize, RunOutcome)> = futures::stream::iter(runs)
        .map(|i| {
            let judge = judge.as_ref();
            let bar = bar.clone();
            async move {
                let out = one_run(sandbox, &cases[i], judge).await;
                bar.inc(1);
                (i, out)
            }
        })
        .buffer_unordered(jobs.max(1))
        .collect()
        .await;
    bar.finish_and_clear();
    outcomes.sort_by_key(|(i, _)| *i);
    let currency = sandbox.config.budget.currency.clone();
    let mut results = Vec::new();
    for (i, loaded) in cases.iter().enumerate() {
        let mine: Vec<&RunOutcome> = outcomes
            .iter()
            .filter(|(j, _)| *j == i)
            .map(|(_, o)| o)
            .collect();
        results.push(fold(loaded, &mine, &currency));
    }
    Ok(results)
}

async fn one_run(sandbox: &Sandbox, loaded: &Loaded, judge: Option<&Judge>) -> RunOutcome {
    let case = &loaded.case;
    match run_case(sandbox, case).await {
        Ok(seen) => {
            let mut why = failures(&case.expect, &seen, &sandbox.config.budget.currency);
            if let (Some(q), Some(judge)) = (&case.expect.judge, judge) {
                let texts: Vec<String> = case.messages.iter().map(|m| m.text.clone()).collect();
                why.extend(judge.verdict(q, &texts, seen.reply()).await);
            }
            RunOutcome {
                seen: Some(seen),
                why,
            }
        }
        Err(e) => RunOutcome {
            seen: None,
            why: vec![format!("run failed: {}", crate::cli::error_chain(&e))],
        },
    }
}

fn fold(loaded: &Loaded, runs: &[&RunOutcome], _currency: &str) -> CaseResult {
    let n = runs.len().max(1) as u64;
    let passes = runs.iter().filter(|r| r.why.is_empty()).count() as u32;
    let seen: Vec<&Observed> = runs.iter().filter_map(|r| r.seen.as_ref()).collect();
    let mean = |f: &dyn Fn(&Observed) -> u64| seen.iter().map(|s| f(s)).sum::<u64>() / n;
    let cost: Option<i64> = seen.iter().map(|s| s.cost()).sum();
    let reason = runs
        .iter()
        .find(|r| !r.why.is_empty())
        .map(|r| r.why.join("; "))
        .unwrap_or_default();
    CaseResult {
        name: loaded.case.name.clone(),
        file: loaded.file.display().to_string(),
        passed: passes as usize == runs.len(),
        reason,
        runs: runs.len() as u32,
        passes,
        pass_rate: passes as f64 / n as f64,
        input_tokens: mean(&|s| s.input_tokens()),
        output_tokens: mean(&|s| s.output_tokens()),
        cost: cost.map(|c| Amount(c / n as i64).units()),
        latency_ms: mean(&|s| s.latency_ms()),
        reply: seen
            .last()
            .map(|s| s.reply().to_string())
            .unwrap_or_default(),
    }
}
