//! `/healthz` latency under the slow-body flood of issue 52: the real `herald` binary on its
//! defaults with one valid API key, `BENCH_CLIENTS` (1100) uploads to /v1/chat/completions
//! each sending one byte every 2 s (dialling again 100 ms after it is closed), and a prober asking `/healthz`
//! on a new connection every 50 ms. Two runs: the defaults (the key's limit of requests in
//! flight answers most uploads 429 at once), and the key's limit raised out of the way with
//! the cap lowered to 256 (every upload admitted; the listener's eviction and probe slots
//! alone keep the probes answered).
//!
//! Prints each run's probe latencies (p50, p90, p99, max, failures) and writes every probe to
//! `<target dir>/bench-slow-body.json`.
//!
//! Run: `cargo build --release && cargo run --release --example bench_slow_body`
//! (`BENCH_CLIENTS`, `BENCH_PROBES` = 200).

use std::time::Duration;

use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::free_port;
use herald_test_support::herald::{herald_bin, write_config, Herald};
use herald_test_support::slow_body::{probe_health, quantile, Flood};
use serde_json::json;

const KEY: &str = "sk-herald-flood-0123456789";

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One run: the daemon with `extra` config and `env`, the flood, the probes.
async fn run(
    name: &str,
    llm: &FakeLlm,
    extra: &str,
    env: &[(&str, &str)],
) -> anyhow::Result<serde_json::Value> {
    let clients = env_or("BENCH_CLIENTS", 1100);
    let probes = env_or("BENCH_PROBES", 200);
    let data = tempfile::tempdir()?;
    let port = free_port();
    let extra = format!(
        "[api]\nenabled = true\n{extra}\n\n\
         [[api.keys]]\nname = \"flood\"\nkey = \"{KEY}\"\nperson = \"ana\"\n\n\
         [[people]]\nname = \"ana\"\nids = []\n"
    );
    let config = write_config(
        data.path(),
        &format!("127.0.0.1:{port}"),
        &llm.base_url(),
        &extra,
    );
    let mut cmd = Herald::serve_config(&config, port).fake_model(&llm.base_url());
    for (k, v) in env {
        cmd = cmd.env(*k, *v);
    }
    let mut daemon = cmd.log_to(&data.path().join("herald.log")).spawn();
    daemon.wait_healthy(Duration::from_secs(30)).await;
    let flood = Flood::new();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            tokio::spawn(
                flood
                    .clone()
                    .client(daemon.addr(), KEY.into(), Duration::from_secs(2)),
            )
        })
        .collect();
    // Let every client dial and send its head before measuring.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The prober on its own thread and runtime, apart from the flood's tasks.
    let base = daemon.base_url();
    let got = tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(probe_health(
                &base,
                probes,
                Duration::from_millis(50),
                Duration::from_secs(10),
            ))
    })
    .await?;
    flood.stop();
    for t in tasks {
        t.await?;
    }
    daemon.kill();
    let answers = flood.answers();
    let mut ms: Vec<f64> = got.iter().map(|p| p.took.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let failed = got.iter().filter(|p| p.result != Ok(200)).count();
    println!(
        "{name}: {clients} slow uploads, {} probes of /healthz: p50 {:.1} ms, p90 {:.1} ms, \
         p99 {:.1} ms, max {:.1} ms, {failed} failed; uploads answered {:?} ({} with retry-after)",
        got.len(),
        quantile(&ms, 0.5),
        quantile(&ms, 0.9),
        quantile(&ms, 0.99),
        ms[ms.len() - 1],
        answers.by_status,
        answers.retry_after,
    );
    Ok(json!({
        "run": name,
        "clients": clients,
        "probes_ms": got.iter().map(|p| p.took.as_secs_f64() * 1000.0).collect::<Vec<_>>(),
        "failed": failed,
        "p50_ms": quantile(&ms, 0.5),
        "p99_ms": quantile(&ms, 0.99),
        "max_ms": ms[ms.len() - 1],
        "uploads_by_status": answers.by_status,
    }))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The flood's own sockets need descriptors too.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    println!("herald binary: {}", herald_bin().display());
    let llm = FakeLlm::start().await;
    let defaults = run("defaults", &llm, "", &[]).await?;
    let listener = run(
        "listener alone (per-key limit off, cap 256)",
        &llm,
        "max_concurrent_per_key = 100000",
        &[("HERALD_SERVER__MAX_CONNECTIONS", "256")],
    )
    .await?;
    let out = herald_bin()
        .parent()
        .map(|d| d.join("bench-slow-body.json"))
        .unwrap_or_else(|| "bench-slow-body.json".into());
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&json!([defaults, listener]))?,
    )?;
    println!("wrote {}", out.display());
    Ok(())
}
