//! Crash loop benchmark: the `herald` binary under a chat load is SIGKILLed at random moments
//! (at least 20 times by default) and restarted on the same store; the store is then counted
//! for lost, duplicated and concurrent work.
//!
//! Run: `cargo build --bin herald && cargo run --example crash_loop` (Postgres: set
//! `DATABASE_URL`; each run uses a fresh schema). Knobs: `CRASH_KILLS`, `CRASH_LANES`,
//! `CRASH_MESSAGES` (minimum per lane). Prints a summary and writes
//! `bench-results/crash_loop.json` (`crash_loop_postgres.json` on Postgres).

#[path = "../tests/support/fake_llm.rs"]
#[allow(dead_code)]
mod fake_llm;
#[path = "../tests/support/promise/mod.rs"]
mod promise;

use std::time::Duration;

use promise::crash::{run, CrashSpec};

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let spec = CrashSpec {
        lanes: knob("CRASH_LANES", 20),
        min_per_lane: knob("CRASH_MESSAGES", 10),
        kills: knob("CRASH_KILLS", 25),
        life_ms: (300, 3000),
        model_jitter: Duration::from_millis(200),
    };
    let outcome = run(&spec).await;
    let c = &outcome.census;
    let r = &outcome.report;
    println!("crash loop on {} ({}):", r["store"], r["profile"]);
    println!(
        "  kills {}  messages {}  wall {:.1}s  retries {}",
        r["kills"],
        c.client_messages,
        r["wall_s"].as_f64().unwrap_or(0.0),
        c.client_retries
    );
    println!(
        "  answered exactly once {}  unanswered {}  answered twice {}  duplicate idem keys {}",
        c.answered_exactly_once, c.unanswered, c.answered_more_than_once, c.duplicate_idem_keys
    );
    println!(
        "  committed turns {}  abandoned by kills {}  concurrent turn pairs {}  takeovers before death {}",
        c.committed_turns, c.abandoned_turns, c.concurrent_turns, c.takeover_before_death
    );
    println!(
        "  transcript violations {}  max attempts on one message {}",
        c.transcript_violations, c.max_inbox_attempts
    );
    println!("  promise held: {}", c.promise_held());
    let name = if r["store"] == "postgres" {
        "crash_loop_postgres.json"
    } else {
        "crash_loop.json"
    };
    std::fs::create_dir_all("bench-results").expect("bench-results");
    let path = format!("bench-results/{name}");
    std::fs::write(&path, serde_json::to_string_pretty(r).expect("json")).expect("write report");
    println!("  wrote {path}");
    if !c.promise_held() {
        std::process::exit(1);
    }
}
