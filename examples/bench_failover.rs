//! Failover under load: two `herald` replicas on one Postgres schema share a fake Telegram's
//! chats (closed loop: each chat writes again as soon as it sees its reply). After a warm-up
//! the polling replica is SIGKILLed; the chats go on for a while against the survivor. Prints
//! and writes `bench-results/failover_load.json`: the longest wait any chat saw for a reply (the
//! stall the kill caused), p50/p99, messages never answered, replies seen more than once, and
//! the turns each replica ran before the kill.
//!
//! Run: `cargo build --bin herald && DATABASE_URL=postgres://… cargo run --example
//! bench_failover`. Knobs: `FAILOVER_CHATS` (20), `FAILOVER_WARMUP_S` (5), `FAILOVER_AFTER_S`
//! (15), `FAILOVER_MODEL_MS` (20).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herald_test_support::{fake_llm::FakeLlm, promise};
use promise::daemon::{herald_bin, Backend, Daemon, Spec};
use promise::telegram::TelegramChannel;
use serde_json::json;
use sqlx::Connection;

fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One message: when it was pushed, and how long its reply took (None: never answered).
struct Sample {
    pushed: Instant,
    waited: Option<Duration>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Ok(admin_url) = std::env::var("DATABASE_URL") else {
        eprintln!("bench_failover needs DATABASE_URL (a Postgres the replicas share)");
        std::process::exit(2);
    };
    let chats = knob("FAILOVER_CHATS", 20) as i64;
    let warmup = Duration::from_secs(knob("FAILOVER_WARMUP_S", 5));
    let after = Duration::from_secs(knob("FAILOVER_AFTER_S", 15));
    promise::init();
    let llm = FakeLlm::start().await;
    llm.set_default_delay(Duration::from_millis(knob("FAILOVER_MODEL_MS", 20)));
    let backend = Backend::postgres(&admin_url).await;
    let tg = TelegramChannel::start().await;
    let spec = |name: &str| {
        tg.daemon_env()
            .into_iter()
            .fold(
                Spec::new(&herald_bin(), name, &backend, &llm.base_url()),
                |s, (k, v)| s.set(&k, &v),
            )
            // Production lease settings: only the dead replica's liveness frees its lanes.
            .set("HERALD_LANES__LEASE_TTL_SECS", "30")
            .set("HERALD_LANES__HEARTBEAT_SECS", "10")
            .set("HERALD_LANES__RESCAN_SECS", "5")
    };
    let poller = Daemon::start(&spec("k1"), 0).await;
    let fake = tg.fake();
    while fake.calls("getUpdates").is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let survivor = Daemon::start(&spec("k2"), 0).await;
    // Both replicas hear each other before the load starts (slots beat every second).
    tokio::time::sleep(Duration::from_secs(3)).await;

    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let going = Arc::new(AtomicBool::new(true));
    let mut loops = Vec::new();
    for c in 0..chats {
        let (tg, samples, going) = (tg.clone(), samples.clone(), going.clone());
        loops.push(tokio::spawn(async move {
            let fake = tg.fake();
            let chat = 9500 + c;
            let mut i = 0;
            while going.load(Ordering::Relaxed) {
                i += 1;
                let want = format!("reply to: k{c}-{i}");
                let pushed = Instant::now();
                fake.push_private_text(chat, chat, &format!("k{c}-{i}"));
                let mut waited = None;
                while pushed.elapsed() < Duration::from_secs(60) {
                    if fake.chat_view(chat).iter().any(|m| m.text == want) {
                        waited = Some(pushed.elapsed());
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                samples.lock().unwrap().push(Sample { pushed, waited });
                if waited.is_none() {
                    return;
                }
            }
        }));
    }
    tokio::time::sleep(warmup).await;
    let before = turns_by_replica(&backend.url).await;
    poller.kill();
    let killed = Instant::now();
    tokio::time::sleep(after).await;
    going.store(false, Ordering::Relaxed);
    for l in loops {
        let _ = l.await;
    }

    let samples = std::mem::take(&mut *samples.lock().unwrap());
    let mut waits: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.waited.map(|w| w.as_secs_f64() * 1000.0))
        .collect();
    waits.sort_by(f64::total_cmp);
    let pct = |p: f64| waits[((waits.len() as f64 - 1.0) * p).round() as usize];
    let unanswered = samples.iter().filter(|s| s.waited.is_none()).count();
    let around_kill = samples
        .iter()
        .filter(|s| s.pushed < killed + Duration::from_secs(1))
        .filter_map(|s| s.waited)
        .filter(|w| w.as_millis() > 1000)
        .count();
    let mut copies: HashMap<String, usize> = HashMap::new();
    for m in fake.sent_messages() {
        *copies.entry(m.text).or_default() += 1;
    }
    let twice = copies.values().filter(|n| **n > 1).count();
    let report = json!({
        "chats": chats,
        "messages": samples.len(),
        "answered": waits.len(),
        "unanswered": unanswered,
        "replies_seen_more_than_once": twice,
        "longest_wait_ms": waits.last(),
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "messages_waiting_over_1s_around_the_kill": around_kill,
        "turns_before_kill_by_replica": before,
        "kill_after_s": warmup.as_secs(),
    });
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
    std::fs::create_dir_all("bench-results").unwrap();
    std::fs::write(
        "bench-results/failover_load.json",
        serde_json::to_string_pretty(&report).unwrap(),
    )
    .unwrap();
    drop(survivor);
    backend.cleanup().await;
}

async fn turns_by_replica(url: &str) -> HashMap<String, usize> {
    let mut db = sqlx::PgConnection::connect(url).await.unwrap();
    let rows: Vec<(String,)> = sqlx::query_as("SELECT holder FROM turns")
        .fetch_all(&mut db)
        .await
        .unwrap();
    let mut out = HashMap::new();
    for (h,) in rows {
        *out.entry(h.split('/').next().unwrap().to_string())
            .or_default() += 1;
    }
    out
}
