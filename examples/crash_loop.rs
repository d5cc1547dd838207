//! Crash loop benchmark: the `herald` binary under a chat load is SIGKILLed at random moments
//! (at least 20 times by default) and restarted on the same store; the store is then counted
//! for lost, duplicated and concurrent work.
//!
//! Run: `cargo build --bin herald && cargo run --example crash_loop` (Postgres: set
//! `DATABASE_URL`; each run uses a fresh schema). Knobs: `CRASH_KILLS`, `CRASH_LANES`,
//! `CRASH_MESSAGES` (minimum per lane), `CRASH_VIA` (`web`, the default, or `telegram`: the
//! load comes through the fake Bot API server and its recorded replies are counted too).
//! Prints a summary and writes `bench-results/crash_loop[_telegram][_postgres].json`.

use herald_test_support::promise;

use std::time::Duration;

use promise::crash::{run, CrashSpec, Via};

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
        via: match std::env::var("CRASH_VIA").as_deref() {
            Ok("telegram") => Via::Telegram,
            _ => Via::Web,
        },
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
    if let Some(t) = &outcome.receipts {
        println!(
            "  telegram: updates {}  sends {}  answered once {}  unanswered {}  resends across a kill {}  resends without one {}",
            t.updates,
            t.sends,
            t.answered_exactly_once,
            t.unanswered,
            t.resends_across_a_kill,
            t.resends_without_a_kill
        );
    }
    println!("  promise held: {}", outcome.promise_held());
    let mut name = "crash_loop".to_string();
    if outcome.receipts.is_some() {
        name.push_str("_telegram");
    }
    if r["store"] == "postgres" {
        name.push_str("_postgres");
    }
    let name = format!("{name}.json");
    std::fs::create_dir_all("bench-results").expect("bench-results");
    let path = format!("bench-results/{name}");
    std::fs::write(&path, serde_json::to_string_pretty(r).expect("json")).expect("write report");
    println!("  wrote {path}");
    if !outcome.promise_held() {
        std::process::exit(1);
    }
}
