//! `--matrix`: the per-turn cost of issue #34 for 1, 10 and 100 chats, Herald on SQLite and on
//! Postgres (when `DATABASE_URL` is set) against the echo floor, alternating Herald and floor
//! runs so that a change in the shared machine's load hits both. Prints a table (turns/s, CPU
//! ms/turn, allocations/turn, p50, p99, and the ratios to the floor) and writes
//! `bench-results/load-matrix.json`.
//!
//! Must not: compare figures from different runs of the command; the ratios are of this run.

use std::path::Path;
use std::time::Duration;

use herald_test_support::telegram_load::proc::loadavg;
use herald_test_support::telegram_load::{RigOpts, Store};
use serde_json::{json, Value};

use crate::measure::{measure, Run};

pub struct MatrixArgs {
    pub chats: Vec<usize>,
    /// Turns per run; each chat sends `turns / chats` messages.
    pub turns: usize,
    /// Messages per chat instead (same session length at every chat count).
    pub messages: Option<usize>,
    pub rounds: usize,
    pub model_ms: u64,
    pub timeout: Duration,
    pub herald_bin: Option<std::path::PathBuf>,
    pub floor_bin: Option<std::path::PathBuf>,
}

pub async fn run(args: &MatrixArgs, dir: &Path) {
    let load_start = loadavg();
    let postgres = std::env::var("DATABASE_URL").is_ok_and(|u| !u.is_empty());
    let mut kinds = vec![("herald-sqlite", Some(Store::Sqlite)), ("floor", None)];
    if postgres {
        kinds.push(("herald-postgres", Some(Store::Postgres)));
    }
    let mut runs: Vec<Run> = Vec::new();
    for round in 0..args.rounds {
        for &chats in &args.chats {
            let messages = args.messages.unwrap_or((args.turns / chats).max(1));
            for (label, store) in &kinds {
                let opts = RigOpts {
                    floor: store.is_none(),
                    bin: match store {
                        Some(_) => args.herald_bin.clone(),
                        None => args.floor_bin.clone(),
                    },
                    store: store.unwrap_or(Store::Sqlite),
                    model_delay: Duration::from_millis(args.model_ms),
                    ..RigOpts::default()
                };
                let m = measure(label, opts, chats, messages, args.timeout).await;
                eprintln!(
                    "round {round}: {label} {chats} chats: {:.0} turns/s, {:.3} ms CPU/turn, {} allocs/turn, p99 {:.1} ms",
                    m.run.turns_per_s,
                    m.run.cpu_ms_per_turn,
                    m.run.allocs_per_turn.map_or("?".into(), |a| format!("{a:.0}")),
                    m.run.p99_ms
                );
                m.rig.finish().await;
                runs.push(m.run);
            }
        }
    }
    let summary = summarize(&runs, &kinds, &args.chats);
    print_table(&summary);
    let targets = targets(&summary);
    for t in &targets {
        let met = if t["met"].as_bool() == Some(true) {
            "met"
        } else {
            "MISSED"
        };
        println!(
            "{}: {} ({met})",
            t["target"].as_str().unwrap_or("?"),
            t["measured"]
        );
    }
    let report = json!({
        "benchmark": "telegram load matrix against the echo floor (issue #34)",
        "method": "closed loop, fake Bot API (polling) and fake model in the driver, pacing off, \
                   one fresh gateway process per run after a 2-message warm-up on 10 other chats; \
                   CPU = utime+stime of the gateway's pid(s) over the measured loop; allocations = \
                   the gateway's counting allocator (calls to alloc, alloc_zeroed and realloc)",
        "turns_per_run": args.turns,
        "rounds": args.rounds,
        "model_ms": args.model_ms,
        "machine": { "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                     "loadavg_start": load_start, "loadavg_end": loadavg() },
        "runs": runs,
        "summary": summary,
        "targets": targets,
    });
    std::fs::create_dir_all(dir).expect("results dir");
    let path = dir.join("load-matrix.json");
    let text = serde_json::to_string_pretty(&report).expect("json");
    std::fs::write(&path, text + "\n").expect("write json");
    eprintln!("wrote {}", path.display());
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Medians over the rounds per gateway and chat count, with the ratios to the floor.
fn summarize(runs: &[Run], kinds: &[(&str, Option<Store>)], chats: &[usize]) -> Vec<Value> {
    let mut rows = Vec::new();
    for &c in chats {
        let of = |label: &str, f: &dyn Fn(&Run) -> Option<f64>| -> Option<f64> {
            let v: Vec<f64> = runs
                .iter()
                .filter(|r| r.gateway == label && r.chats == c)
                .filter_map(f)
                .collect();
            (!v.is_empty()).then(|| median(v))
        };
        let floor_cpu = of("floor", &|r| Some(r.cpu_ms_per_turn));
        let floor_allocs = of("floor", &|r| r.allocs_per_turn);
        let floor_p99 = of("floor", &|r| Some(r.p99_ms));
        for (label, _) in kinds {
            let cpu = of(label, &|r| Some(r.cpu_ms_per_turn));
            let allocs = of(label, &|r| r.allocs_per_turn);
            let p99 = of(label, &|r| Some(r.p99_ms));
            let ratio = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b.max(1e-9));
            rows.push(json!({
                "gateway": label,
                "chats": c,
                "turns_per_s": of(label, &|r| Some(r.turns_per_s)),
                "cpu_ms_per_turn": cpu,
                "allocs_per_turn": allocs,
                "alloc_kib_per_turn": of(label, &|r| r.alloc_kib_per_turn),
                "p50_ms": of(label, &|r| Some(r.p50_ms)),
                "p99_ms": p99,
                "lost": of(label, &|r| Some(r.lost as f64)),
                "duplicated": of(label, &|r| Some(r.duplicated as f64)),
                "cpu_x_floor": ratio(cpu, floor_cpu),
                "allocs_x_floor": ratio(allocs, floor_allocs),
                "p99_minus_floor_ms": p99.zip(floor_p99).map(|(a, b)| a - b),
            }));
        }
    }
    rows
}

fn print_table(rows: &[Value]) {
    let num = |v: &Value, k: &str, p: usize| match v[k].as_f64() {
        Some(x) => format!("{x:.p$}"),
        None => "-".into(),
    };
    println!(
        "{:<16} {:>5} {:>8} {:>11} {:>11} {:>9} {:>7} {:>7} {:>9} {:>10} {:>10}",
        "gateway",
        "chats",
        "turns/s",
        "CPU ms/turn",
        "allocs/turn",
        "KiB/turn",
        "p50 ms",
        "p99 ms",
        "CPU×floor",
        "allocs×fl.",
        "p99−floor"
    );
    for r in rows {
        println!(
            "{:<16} {:>5} {:>8} {:>11} {:>11} {:>9} {:>7} {:>7} {:>9} {:>10} {:>10}",
            r["gateway"].as_str().unwrap_or("?"),
            r["chats"],
            num(r, "turns_per_s", 0),
            num(r, "cpu_ms_per_turn", 3),
            num(r, "allocs_per_turn", 0),
            num(r, "alloc_kib_per_turn", 1),
            num(r, "p50_ms", 1),
            num(r, "p99_ms", 1),
            num(r, "cpu_x_floor", 2),
            num(r, "allocs_x_floor", 1),
            num(r, "p99_minus_floor_ms", 1),
        );
    }
}

/// Issue #34's targets, as measured: CPU per turn ≤ 1.5× the floor's on SQLite and ≤ 2× on
/// Postgres (every chat count), p99 at 10 chats ≤ the floor's + 20 ms.
fn targets(rows: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for r in rows {
        let (label, chats) = (r["gateway"].as_str().unwrap_or(""), r["chats"].as_u64());
        let limit = match label {
            "herald-sqlite" => 1.5,
            "herald-postgres" => 2.0,
            _ => continue,
        };
        if let Some(x) = r["cpu_x_floor"].as_f64() {
            out.push(json!({
                "target": format!("{label}, {} chats: CPU/turn ≤ {limit}× floor", chats.unwrap_or(0)),
                "measured": (x * 100.0).round() / 100.0, "met": x <= limit,
            }));
        }
        if chats == Some(10) {
            if let Some(d) = r["p99_minus_floor_ms"].as_f64() {
                out.push(json!({
                    "target": format!("{label}, 10 chats: p99 ≤ floor p99 + 20 ms"),
                    "measured": (d * 10.0).round() / 10.0, "met": d <= 20.0,
                }));
            }
        }
    }
    out
}
