//! Platforms side by side: the same closed-loop load through each platform's wire fake
//! (Telegram's Bot API, Slack's Socket Mode and Web API, signal-cli's HTTP daemon, WhatsApp's
//! Cloud API webhooks and Graph sends) into the
//! real `herald` binary, with the fake model answering instantly, so the figures are the
//! gateway's platform path: turns per second, latency from the message handed to the platform
//! to the reply recorded there, and what a person would have seen lost or twice.
//!
//! Run: `cargo build --release && cargo run --release --example bench_platforms`.
//! Options: `--lanes N` (20), `--messages M` per lane (20), `--runs R` per platform (3; the
//! median run by turns/s is reported), `--platforms telegram,slack,signal,whatsapp`, `--release` (use
//! `<target>/release/herald` whatever this example was built as) or `--bin PATH`.
//! The store is SQLite in a temp dir (`DATABASE_URL` set: a fresh Postgres schema).
//! Pacing is off on each (`telegram.pacing = false`, `slack.pacing = false`, `whatsapp.pacing = false`): with it on, Slack's
//! one message a second per channel, not Herald, decides a many-message lane's figures.
//! `HERALD_SLACK__PACING=true` (or `HERALD_TELEGRAM__PACING=true`) in the environment paces it.
//! Prints a table and writes `bench-results/platforms.json` (another size:
//! `platforms-<lanes>x<messages>.json`).

#[path = "support/platform_run.rs"]
mod platform_run;

use std::path::PathBuf;

use herald_test_support::promise::{self, daemon::herald_bin};
use platform_run::{Load, Platform};
use serde_json::{json, Value};

struct Args {
    size: Load,
    runs: usize,
    platforms: Vec<Platform>,
    bin: PathBuf,
}

fn args() -> Args {
    let mut a = Args {
        size: Load {
            lanes: 20,
            messages: 20,
        },
        runs: 3,
        platforms: vec![Platform::Telegram, Platform::Slack, Platform::Signal],
        bin: herald_bin(),
    };
    let mut it = std::env::args().skip(1);
    let number = |v: Option<String>, flag: &str| -> usize {
        v.and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{flag} takes a number"))
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--lanes" => a.size.lanes = number(it.next(), "--lanes"),
            "--messages" => a.size.messages = number(it.next(), "--messages"),
            "--runs" => a.runs = number(it.next(), "--runs").max(1),
            "--release" => {
                let target = a.bin.parent().and_then(|p| p.parent()).expect("target dir");
                a.bin = target.join("release").join("herald");
            }
            "--bin" => a.bin = PathBuf::from(it.next().expect("--bin takes a path")),
            "--platforms" => {
                a.platforms = it
                    .next()
                    .expect("--platforms takes a list")
                    .split(',')
                    .map(|p| match p {
                        "telegram" => Platform::Telegram,
                        "slack" => Platform::Slack,
                        "signal" => Platform::Signal,
                        "whatsapp" => Platform::WhatsApp,
                        other => {
                            panic!("unknown platform {other}: telegram, slack, signal or whatsapp")
                        }
                    })
                    .collect()
            }
            // `cargo bench`-style harness flags are ignored.
            "--bench" => {}
            other => panic!("unknown option {other}"),
        }
    }
    assert!(
        a.bin.exists(),
        "no herald binary at {} (cargo build --release)",
        a.bin.display()
    );
    a
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(0.0)
}

/// The run with the median turns/s.
fn median(runs: &[Value]) -> Value {
    let mut sorted: Vec<&Value> = runs.iter().collect();
    sorted.sort_by(|a, b| f(a, "turns_per_s").total_cmp(&f(b, "turns_per_s")));
    sorted[sorted.len() / 2].clone()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn row(name: &str, r: &Value) {
    let l = &r["latency_ms"];
    println!(
        "{name:<9} {:>6} {:>6} {:>8.2} {:>8.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>5} {:>5} {:>8.2}",
        f(r, "messages"),
        f(r, "lanes"),
        f(r, "wall_s"),
        f(r, "turns_per_s"),
        f(l, "p50"),
        f(l, "p90"),
        f(l, "p99"),
        f(l, "max"),
        f(r, "lost"),
        f(r, "duplicated"),
        f(r, "daemon_cpu_ms_per_turn"),
    );
}

#[tokio::main]
async fn main() {
    promise::init();
    let a = args();
    let load_at_start = load_average();
    let mut runs: Vec<(Platform, Vec<Value>)> = a.platforms.iter().map(|p| (*p, vec![])).collect();
    // Interleaved (T, S, T, S, …) so a busy spell of the shared machine hits both alike.
    for i in 0..a.runs {
        for (platform, done) in runs.iter_mut() {
            let r = platform_run::run(*platform, &a.bin, a.size).await;
            println!(
                "run {} {:<8}: {:.1} turns/s, p99 {:.1} ms, lost {}, duplicated {}",
                i + 1,
                platform.name(),
                f(&r, "turns_per_s"),
                f(&r["latency_ms"], "p99"),
                r["lost"],
                r["duplicated"]
            );
            done.push(r);
        }
    }
    println!(
        "\nmedian of {} runs ({} lanes × {} messages, binary {}):",
        a.runs,
        a.size.lanes,
        a.size.messages,
        a.bin.display()
    );
    println!(
        "{:<9} {:>6} {:>6} {:>8} {:>8} {:>7} {:>7} {:>7} {:>7} {:>5} {:>5} {:>8}",
        "platform",
        "msgs",
        "lanes",
        "wall s",
        "turns/s",
        "p50",
        "p90",
        "p99",
        "max",
        "lost",
        "dup",
        "cpu ms/t"
    );
    let mut medians = serde_json::Map::new();
    for (platform, done) in &runs {
        let m = median(done);
        row(platform.name(), &m);
        medians.insert(platform.name().into(), m);
    }
    let ratio = match (medians.get("slack"), medians.get("telegram")) {
        (Some(s), Some(t)) => {
            let tps = f(s, "turns_per_s") / f(t, "turns_per_s");
            let p99 = f(&s["latency_ms"], "p99") / f(&t["latency_ms"], "p99");
            println!("slack / telegram: turns/s {tps:.2}, p99 {p99:.2}");
            json!({"turns_per_s": tps, "p99": p99,
                   "within_20_percent": (0.8..).contains(&tps) && p99 <= 1.2})
        }
        _ => Value::Null,
    };
    let report = json!({
        "profile": if a.bin.to_string_lossy().contains("/release/") { "release" } else { "debug" },
        "binary": a.bin.display().to_string(),
        "lanes": a.size.lanes,
        "messages_per_lane": a.size.messages,
        "runs_per_platform": a.runs,
        "telegram_pacing": std::env::var("HERALD_TELEGRAM__PACING").unwrap_or("false".into()),
        "slack_pacing": std::env::var("HERALD_SLACK__PACING").unwrap_or("false".into()),
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "load_average_start": load_at_start,
        "load_average_end": load_average(),
        "median": medians,
        "slack_over_telegram": ratio,
        "runs": runs.iter().map(|(p, r)| (p.name().to_string(), json!(r))).collect::<serde_json::Map<_, _>>(),
    });
    std::fs::create_dir_all("bench-results").expect("bench-results");
    let path = match (a.size.lanes, a.size.messages) {
        (20, 20) => "bench-results/platforms.json".to_string(),
        (l, m) => format!("bench-results/platforms-{l}x{m}.json"),
    };
    std::fs::write(&path, serde_json::to_string_pretty(&report).expect("json")).expect("write");
    println!("wrote {path}");
}
