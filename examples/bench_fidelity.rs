//! Fidelity benchmark: what the projector keeps of a long conversation, measured on seeded
//! transcripts with planted facts (commands with known outcomes, paths, error names, ids,
//! hostile tool output) at the benchmark's window sizes and budgets.
//!
//! The issue claims the projector keeps every fact that fits its budget, states each command's
//! final outcome correctly and lets no hostile text through; speed benchmarks cannot show that,
//! so this one counts it. Run: `cargo run --release --example bench_fidelity`
//! (`FIDELITY_WINDOWS=75000`, `FIDELITY_SEEDS=3` pick windows and seeds per window).
//! Prints a table and writes `bench-results/fidelity.json`.

use herald::agent::compaction::{project, projection_budget_chars};
use serde_json::{json, Value};

use herald_test_support::fidelity::{planted, score};

use score::{Kind, Score};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn add(total: &mut Kind, k: &Kind) {
    total.planted += k.planted;
    total.within_caps += k.within_caps;
    total.kept += k.kept;
    total.kept_within_caps += k.kept_within_caps;
    total.spurious += k.spurious;
    total.silent_misses += k.silent_misses;
    total.omitted_note += k.omitted_note;
    total.unaccounted += k.unaccounted;
}

fn pct(part: usize, whole: usize) -> String {
    if whole == 0 {
        return "—".into();
    }
    format!("{:.1} %", 100.0 * part as f64 / whole as f64)
}

/// `kept / planted (within caps: kept / room)` for one kind.
fn recall_cell(k: &Kind) -> String {
    format!(
        "{} all, {} in caps",
        pct(k.kept, k.planted),
        pct(k.kept_within_caps, k.within_caps)
    )
}

fn main() -> anyhow::Result<()> {
    let windows: Vec<usize> = std::env::var("FIDELITY_WINDOWS")
        .unwrap_or_else(|_| "10000,75000,300000".into())
        .split(',')
        .filter_map(|w| w.trim().parse().ok())
        .collect();
    let seeds: u64 = env_or("FIDELITY_SEEDS", 5).max(1);
    let mut rows = Vec::new();
    let mut transcripts = Vec::new();
    println!(
        "| window | transcripts | commands kept | files kept | error names kept | outcomes correct | earlier failures shown | ids correct | bad citations | residue | faithful |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for tokens in windows {
        // The window this middle would be 75 % of, as in `bench_context`.
        let budget = projection_budget_chars(tokens * 4 / 3);
        let (mut commands, mut files, mut names) =
            (Kind::default(), Kind::default(), Kind::default());
        let mut t = Score::default();
        let mut faithful = 0;
        let mut messages = 0;
        for seed in 1..=seeds {
            let p = planted::planted(seed, tokens);
            let projection = project(&p.messages, None, budget);
            let s = score::score(&p, &projection);
            messages += p.messages.len();
            add(&mut commands, &s.commands);
            add(&mut files, &s.files);
            add(&mut names, &s.names);
            t.outcomes_listed += s.outcomes_listed;
            t.outcomes_correct += s.outcomes_correct;
            t.earlier_failures_expected += s.earlier_failures_expected;
            t.earlier_failures_shown += s.earlier_failures_shown;
            t.file_actions_correct += s.file_actions_correct;
            t.ids_checked += s.ids_checked;
            t.ids_correct += s.ids_correct;
            t.citations += s.citations;
            t.bad_citations += s.bad_citations;
            t.residue.escapes += s.residue.escapes;
            t.residue.controls += s.residue.controls;
            t.residue.invisible += s.residue.invisible;
            t.residue.markers += s.residue.markers;
            t.residue.stray_headings += s.residue.stray_headings;
            faithful += usize::from(s.faithful);
            for problem in &s.problems {
                println!("  {}: {problem}", p.label);
            }
            transcripts.push(
                json!({"label": p.label, "window_tokens": tokens, "seed": seed,
                "messages": p.messages.len(), "hostile_messages": p.truth.hostile,
                "budget_chars": budget, "projection_chars": projection.chars().count(),
                "score": s}),
            );
        }
        println!(
            "| {tokens} | {seeds} ({messages} messages) | {} | {} | {} | {}/{} | {}/{} | {}/{} | {}/{} | {} | {faithful}/{seeds} |",
            recall_cell(&commands),
            recall_cell(&files),
            recall_cell(&names),
            t.outcomes_correct,
            t.outcomes_listed,
            t.earlier_failures_shown,
            t.earlier_failures_expected,
            t.ids_correct,
            t.ids_checked,
            t.bad_citations,
            t.citations,
            t.residue.total(),
        );
        rows.push(
            json!({"window_tokens": tokens, "seeds": seeds, "messages": messages,
            "budget_chars": budget, "commands": commands, "files": files, "error_names": names,
            "outcomes_listed": t.outcomes_listed, "outcomes_correct": t.outcomes_correct,
            "earlier_failures_expected": t.earlier_failures_expected,
            "earlier_failures_shown": t.earlier_failures_shown,
            "file_actions_correct": t.file_actions_correct,
            "ids_checked": t.ids_checked, "ids_correct": t.ids_correct,
            "citations": t.citations, "bad_citations": t.bad_citations,
            "residue": t.residue, "faithful": faithful}),
        );
    }
    let lines = [
        ("silent misses", "silent_misses"),
        ("never counted", "unaccounted"),
        ("spurious entries", "spurious"),
        ("omitted (notes)", "omitted_note"),
    ];
    for (label, field) in lines {
        let cells: Vec<String> = rows
            .iter()
            .map(|r| {
                let get = |k: &str| r[k][field].as_u64().unwrap_or(0);
                format!(
                    "{}: commands {}, files {}, names {}",
                    r["window_tokens"],
                    get("commands"),
                    get("files"),
                    get("error_names")
                )
            })
            .collect();
        println!("{label}: {}", cells.join("; "));
    }
    std::fs::create_dir_all("bench-results")?;
    let report: Value = json!({"windows": rows, "transcripts": transcripts,
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" }});
    std::fs::write(
        "bench-results/fidelity.json",
        serde_json::to_string_pretty(&report)?,
    )?;
    println!("wrote bench-results/fidelity.json");
    Ok(())
}
