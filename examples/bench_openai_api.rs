//! What the OpenAI-compatible API adds per request over the web chat's own `POST /api/v1/chat`,
//! on the same fake-model turn: the same daemon (SQLite, fake model answering at once), the
//! requests alternating between the two routes, each in a fresh conversation, one at a time.
//!
//! Prints medians and p90s and writes `<target dir>/bench-openai-api.json`.
//!
//! Run: `cargo run --release --example bench_openai_api` (`BENCH_RUNS=60` by default).

use std::time::{Duration, Instant};

use herald::app::App;
use herald::config::{ApiKeyConfig, Person, Secret};
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::test_config;
use serde_json::json;

const KEY: &str = "sk-herald-bench-0123456789";

fn quantile(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir()?;
    let mut c = test_config(&llm, &data);
    c.cron.enabled = false;
    c.people = vec![Person {
        name: "bench".into(),
        ids: vec![],
    }];
    c.api.enabled = true;
    c.api.keys = vec![ApiKeyConfig {
        name: "bench".into(),
        key: Some(Secret::new(KEY)),
        key_env: None,
        person: "bench".into(),
    }];
    let app = App::start(c).await?;
    let http = reqwest::Client::new();
    let base = format!("http://{}", app.addr);
    let (mut web, mut api) = (Vec::new(), Vec::new());
    // Two warm-up rounds, not counted.
    for i in 0..runs + 2 {
        let t = Instant::now();
        let r = http
            .post(format!("{base}/api/v1/chat"))
            .json(&json!({ "lane": format!("web:bench-{i}"), "text": "hello" }))
            .send()
            .await?;
        anyhow::ensure!(r.status().is_success(), "web chat: {}", r.status());
        r.bytes().await?;
        let web_took = t.elapsed();
        let t = Instant::now();
        let r = http
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(KEY)
            .header("X-Herald-Conversation", format!("bench-{i}"))
            .json(
                &json!({ "model": "herald", "messages": [{ "role": "user", "content": "hello" }] }),
            )
            .send()
            .await?;
        anyhow::ensure!(r.status().is_success(), "api: {}", r.status());
        r.bytes().await?;
        let api_took = t.elapsed();
        if i >= 2 {
            web.push(web_took);
            api.push(api_took);
        }
    }
    app.shutdown().await;
    let (w50, a50) = (quantile(&mut web, 0.5), quantile(&mut api, 0.5));
    let (w90, a90) = (quantile(&mut web, 0.9), quantile(&mut api, 0.9));
    println!("one fake-model turn per request, {runs} runs each, SQLite, fresh conversation each");
    println!("{:<28} {:>10} {:>10}", "route", "median ms", "p90 ms");
    println!(
        "{:<28} {:>10.2} {:>10.2}",
        "POST /api/v1/chat",
        ms(w50),
        ms(w90)
    );
    println!(
        "{:<28} {:>10.2} {:>10.2}",
        "POST /v1/chat/completions",
        ms(a50),
        ms(a90)
    );
    println!("added by the API (median): {:.2} ms", ms(a50) - ms(w50));
    let dir = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    std::fs::create_dir_all(&dir)?;
    let path = std::path::Path::new(&dir).join("bench-openai-api.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({
            "runs": runs,
            "web_chat_ms": { "median": ms(w50), "p90": ms(w90) },
            "chat_completions_ms": { "median": ms(a50), "p90": ms(a90) },
            "added_median_ms": ms(a50) - ms(w50),
        }))?,
    )?;
    println!("wrote {}", path.display());
    Ok(())
}
