//! Core benchmark: time from `herald serve` to `/readyz`, idle RSS, and turn overhead through
//! the web chat API with a fake model that answers instantly.
//!
//! Run: `cargo run --release --example bench_core` (build the binary first:
//! `cargo build --release`). Prints a table and writes `bench-results/core.json`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::free_port;
use serde_json::json;

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx]
}

async fn ready_ms(
    bin: &str,
    data: &std::path::Path,
    llm: &FakeLlm,
) -> (f64, u32, std::process::Child, u16) {
    let port = free_port();
    let started = Instant::now();
    let child = Command::new(bin)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(data)
        .env("HERALD_LLM__BASE_URL", llm.base_url())
        .env("HERALD_LLM__MODEL", "fake-model")
        .env("HERALD_LOG__LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start herald (cargo build --release first)");
    let http = reqwest::Client::new();
    loop {
        if let Ok(r) = http
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await
        {
            if r.status().is_success() {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let pid = child.id();
    (ms, pid, child, port)
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let bin = format!("target/{profile}/herald");
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();

    // 1. Cold start (fresh database, migrations run) and warm start.
    let (cold_ms, _, mut child, _) = ready_ms(&bin, data.path(), &llm).await;
    child.kill().ok();
    child.wait().ok();
    let (warm_ms, pid, mut child, port) = ready_ms(&bin, data.path(), &llm).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_rss = rss_kib(pid, "VmRSS:");

    // 2. Turns through the HTTP API: sequential (one lane) and concurrent (many lanes).
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/v1/chat");
    let chat = move |lane: String, text: String| {
        let http = http.clone();
        let url = url.clone();
        async move {
            let t = Instant::now();
            let r = http
                .post(&url)
                .json(&json!({"lane": lane, "text": text}))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
            let _: serde_json::Value = r.json().await.unwrap();
            t.elapsed().as_secs_f64() * 1000.0
        }
    };
    let mut seq = Vec::new();
    for i in 0..200 {
        seq.push(chat("web:seq".into(), format!("message {i}")).await);
    }
    seq.sort_by(|a, b| a.partial_cmp(b).unwrap());

    let lanes = 50;
    let per_lane = 10;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for l in 0..lanes {
        let chat = chat.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for i in 0..per_lane {
                lat.push(chat(format!("web:c{l}"), format!("m{i}")).await);
            }
            lat
        }));
    }
    let mut conc = Vec::new();
    for t in tasks {
        conc.extend(t.await.unwrap());
    }
    let wall = started.elapsed().as_secs_f64();
    conc.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let peak_rss = rss_kib(pid, "VmHWM:");
    child.kill().ok();
    child.wait().ok();

    let report = json!({
        "profile": profile,
        "store": "sqlite",
        "ready_ms_cold": cold_ms,
        "ready_ms_warm": warm_ms,
        "idle_rss_kib": idle_rss,
        "peak_rss_kib": peak_rss,
        "sequential_turns": seq.len(),
        "sequential_ms_p50": percentile(&seq, 0.5),
        "sequential_ms_p99": percentile(&seq, 0.99),
        "concurrent_lanes": lanes,
        "concurrent_turns": conc.len(),
        "concurrent_turns_per_s": conc.len() as f64 / wall,
        "concurrent_ms_p50": percentile(&conc, 0.5),
        "concurrent_ms_p99": percentile(&conc, 0.99),
        "model_requests": llm.request_count(),
    });
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
    std::fs::create_dir_all("bench-results").ok();
    std::fs::write(
        "bench-results/core.json",
        serde_json::to_string_pretty(&report).unwrap(),
    )
    .unwrap();
}
