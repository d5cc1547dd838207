//! Benchmark, not a test (ignored by default): 100 chats × 20 messages, closed loop, through
//! the real daemon core and teloxide against the fake Telegram server and an instant fake
//! model, with Telegram's published pacing on. Run it with
//! `cargo test --release --test bench_telegram -- --ignored --nocapture`; it prints and writes
//! `bench-results/telegram.json`.
//!
//! Latency is from pushing the update into the fake to the fake recording the `sendMessage`
//! (seen by a 5 ms watcher). Peak RSS is the whole test process: daemon, fakes and driver.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use herald::app::App;
use herald::config::Secret;
use support::fake_llm::FakeLlm;
use support::fake_telegram::FakeTelegram;
use support::harness::{init, test_config};
use tokio::sync::mpsc;

const CHATS: i64 = 100;
const MESSAGES: usize = 20;
const PER_REPLY_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark; run with --ignored --nocapture"]
async fn bench_telegram_closed_loop() {
    init();
    let tg = std::sync::Arc::new(FakeTelegram::start("123456:BENCH-token").await);
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.telegram.token = Some(Secret::new(tg.token()));
    c.telegram.api_url = tg.url();
    c.telegram.allow_all_users = true;
    c.telegram.poll_timeout_secs = 5;
    c.outbox.poll_ms = 50;
    let app = App::start(c).await.unwrap();

    // Watcher: routes each recorded sendMessage to the chat that waits for it.
    let mut routes: HashMap<i64, mpsc::UnboundedSender<(String, Instant)>> = HashMap::new();
    let mut inboxes = Vec::new();
    for i in 0..CHATS {
        let (tx, rx) = mpsc::unbounded_channel();
        routes.insert(chat_id(i), tx);
        inboxes.push(rx);
    }
    let watcher_tg = tg.clone();
    let watcher = tokio::spawn(async move {
        let mut seen = 0;
        loop {
            let sent = watcher_tg.sent_messages();
            let now = Instant::now();
            for m in &sent[seen..] {
                if let Some(tx) = routes.get(&m.chat_id) {
                    let _ = tx.send((m.text.clone(), now));
                }
            }
            seen = sent.len();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });

    let started = Instant::now();
    let mut drivers = Vec::new();
    for (i, mut rx) in inboxes.into_iter().enumerate() {
        let tg = tg.clone();
        drivers.push(tokio::spawn(async move {
            let chat = chat_id(i as i64);
            let mut latencies = Vec::new();
            let mut lost = 0;
            for k in 0..MESSAGES {
                let text = format!("chat {chat} message {k}");
                let want = format!("reply to: {text}");
                let t0 = Instant::now();
                tg.push_private_text(chat, chat, &text);
                let got = tokio::time::timeout(PER_REPLY_TIMEOUT, async {
                    while let Some((t, at)) = rx.recv().await {
                        if t == want {
                            return Some(at);
                        }
                    }
                    None
                })
                .await;
                match got {
                    Ok(Some(at)) => latencies.push(at.duration_since(t0)),
                    _ => lost += 1,
                }
            }
            (latencies, lost)
        }));
    }
    let mut latencies = Vec::new();
    let mut lost = 0;
    for d in drivers {
        let (l, n) = d.await.unwrap();
        latencies.extend(l);
        lost += n;
    }
    let elapsed = started.elapsed();
    // Give a late duplicate the chance to show up before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    watcher.abort();
    let mut copies: HashMap<(i64, String), usize> = HashMap::new();
    for m in tg.sent_messages() {
        *copies.entry((m.chat_id, m.text)).or_default() += 1;
    }
    let duplicated: usize = copies.values().map(|n| n.saturating_sub(1)).sum();
    latencies.sort();
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let idx = ((latencies.len() as f64 - 1.0) * p).round() as usize;
        latencies[idx].as_secs_f64() * 1000.0
    };
    let turns = latencies.len();
    let result = serde_json::json!({
        "benchmark": "telegram closed loop",
        "chats": CHATS,
        "messages_per_chat": MESSAGES,
        "pacing": "Telegram published limits (1 msg/s per chat, 30 msg/s overall)",
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "elapsed_s": elapsed.as_secs_f64(),
        "turns": turns,
        "turns_per_s": turns as f64 / elapsed.as_secs_f64(),
        "latency_ms_p50": pct(0.50),
        "latency_ms_p99": pct(0.99),
        "latency_ms_max": latencies.last().map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0),
        "replies_lost": lost,
        "replies_duplicated": duplicated,
        "peak_rss_mb": peak_rss_kb() as f64 / 1024.0,
    });
    let pretty = serde_json::to_string_pretty(&result).unwrap();
    println!("{pretty}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("telegram.json"), pretty + "\n").unwrap();
    app.shutdown().await;
    assert_eq!(lost, 0, "replies lost");
    assert_eq!(duplicated, 0, "replies duplicated");
}

fn chat_id(i: i64) -> i64 {
    10_000 + i
}

/// Peak resident set size of this process (VmHWM), in kB.
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
