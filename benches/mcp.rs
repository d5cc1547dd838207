//! What one MCP tool round trip costs next to the model call it sits between, on localhost: the
//! fake model answering a small chat request, against `McpTool::call` on the test shop server
//! over stdio (the real rmcp client and a Python child process). Also whole web turns with and
//! without one MCP call, and the time and peak memory of one 10 MB result.
//!
//! `cargo bench --bench mcp` prints a summary and writes `bench-results/mcp.json`. The count
//! comes from `MCP_BENCH_N` (default 300).

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald::agent::mcp::{connect, tools_of};
use herald::agent::tools::{Tool, ToolContext};
use herald::app::App;
use herald::domain::LaneKey;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, Client};
use herald_test_support::mcp::stdio_server;
use serde_json::json;
use tokio_util::task::TaskTracker;

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// (p50, p95, mean) in milliseconds.
fn stats(mut v: Vec<Duration>) -> (f64, f64, f64) {
    v.sort();
    let p = |q: f64| ms(v[((v.len() as f64 - 1.0) * q).round() as usize]);
    let mean = ms(v.iter().sum::<Duration>() / v.len() as u32);
    (p(0.5), p(0.95), mean)
}

/// The process's peak resident memory so far (VmHWM), in MiB.
fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| (kb / 1024.0 * 10.0).round() / 10.0)
        .unwrap_or(0.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("the MCP benchmark runs under `cargo bench --bench mcp`; nothing to do");
        return;
    }
    init();
    let n: usize = std::env::var("MCP_BENCH_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let llm = FakeLlm::start().await;
    let http = reqwest::Client::new();
    let body = json!({"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]});
    let url = format!("{}/chat/completions", llm.base_url());
    let mut model = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = http
            .post(&url)
            .json(&body)
            .send()
            .await
            .expect("model call");
        assert!(r.status().is_success());
        let _ = r.bytes().await.unwrap();
        model.push(t.elapsed());
    }

    let tracker = TaskTracker::new();
    let server = stdio_server("shop", "normal", &[]);
    let t = Instant::now();
    let mut conn = connect::connect(&server, &tracker).await.expect("connects");
    let connect_ms = ms(t.elapsed());
    let (tools, _) = tools_of(&server, &conn);
    let find = |name: &str| -> Arc<dyn Tool> {
        tools
            .iter()
            .find(|t| t.spec().name == name)
            .unwrap()
            .clone()
    };
    let lookup = find("shop__lookup_order");
    let ctx = ToolContext {
        lane: LaneKey::new("web:bench"),
        person: "web:bench".into(),
        session_id: "bench".into(),
        turn_id: None,
        inbox_id: None,
        call_index: 0,
        turn_files: Vec::new(),
        agent: herald::config::DEFAULT_AGENT.to_string(),
    };
    let mut mcp = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let out = lookup.call(&ctx, r#"{"id":"A-1001"}"#).await.expect("call");
        assert!(out.starts_with("order A-1001"));
        mcp.push(t.elapsed());
    }
    let before = peak_mib();
    let t = Instant::now();
    let huge = find("shop__huge").call(&ctx, "{}").await.expect("huge");
    let huge_ms = ms(t.elapsed());
    let after = peak_mib();
    let huge_chars = huge.chars().count();
    let _ = conn.service.close().await;
    if let Some(c) = conn.child.as_mut() {
        let _ = c.kill().await;
    }

    // Whole turns over the web API: a plain answer, and one MCP call then the answer.
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.mcp.servers = vec![server.clone()];
    let app = App::start(c).await.expect("app");
    let client = Client::new(&app);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let turns = (n / 5).max(10);
    let mut plain = Vec::new();
    let mut with_tool = Vec::new();
    for i in 0..turns {
        let t = Instant::now();
        let (_, b) = client.chat("web:plain", &format!("hello {i}")).await;
        assert!(b["reply"].is_string());
        plain.push(t.elapsed());
        llm.push(Step::ToolCall(
            "shop__lookup_order".into(),
            r#"{"id":"A-1001"}"#.into(),
        ));
        llm.push(Step::Reply("shipped".into()));
        let t = Instant::now();
        let (_, b) = client.chat("web:tool", &format!("order? {i}")).await;
        assert_eq!(b["reply"], "shipped");
        with_tool.push(t.elapsed());
    }
    app.shutdown().await;

    let (m50, m95, mmean) = stats(model);
    let (c50, c95, cmean) = stats(mcp);
    let (p50, p95, _) = stats(plain);
    let (t50, t95, _) = stats(with_tool);
    let report = json!({
        "calls": n,
        "model_call_ms": {"p50": m50, "p95": m95, "mean": mmean},
        "mcp_stdio_call_ms": {"p50": c50, "p95": c95, "mean": cmean},
        "mcp_connect_ms": connect_ms,
        "turns": turns,
        "turn_plain_ms": {"p50": p50, "p95": p95},
        "turn_one_mcp_call_ms": {"p50": t50, "p95": t95},
        "huge_10mb_call_ms": huge_ms,
        "huge_result_chars_after_cap": huge_chars,
        "peak_rss_mib_before_huge": before,
        "peak_rss_mib_after_huge": after,
    });
    let pretty = serde_json::to_string_pretty(&report).unwrap();
    println!("{pretty}");
    println!(
        "one MCP stdio round trip: p50 {c50} ms vs a bare model call p50 {m50} ms; a turn with one \
         MCP call (two model calls) p50 {t50} ms vs a plain turn p50 {p50} ms; 10 MB result: \
         {huge_ms} ms, peak RSS {before} -> {after} MiB"
    );
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-results");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("mcp.json"), pretty + "\n").unwrap();
}
