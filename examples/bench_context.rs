//! Context benchmark: deterministic projection time for 10k, 75k and 300k-token windows
//! (median and max over 25 runs), and `store.search` latency over a large store (SQLite, and
//! Postgres when `DATABASE_URL` is set).
//!
//! Run: `cargo run --release --example bench_context` (`BENCH_ROWS=200000` for a smaller
//! store; default 1,000,000). Prints a table and writes `bench-results/context.json`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald::agent::compaction::{estimate_tokens, project, projection_budget_chars, ProjMessage};
use herald::domain::{Role, ToolCall};
use herald::store::{self, NewMessage, Session, Store};
use serde_json::{json, Value};

const RUNS: usize = 25;

/// A synthetic agent transcript of about `tokens` tokens: requests, shell calls with exit
/// codes, file reads, errors, answers.
fn transcript(tokens: usize) -> Vec<ProjMessage> {
    let mut out = Vec::new();
    let (mut used, mut id, mut i) = (0usize, 1i64, 0usize);
    let mut push = |m: ProjMessage, used: &mut usize| {
        *used += estimate_tokens(&m.content) + 4;
        out.push(m);
    };
    while used < tokens {
        let msg = |id, role, content: String| ProjMessage {
            id,
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
        };
        push(
            msg(
                id,
                Role::User,
                format!("Please fix test {i} in src/mod{i}.rs; it fails on CI."),
            ),
            &mut used,
        );
        id += 1;
        let call = ToolCall {
            id: format!("c{i}"),
            name: "terminal".into(),
            arguments: json!({"command": format!("cargo test -p crate{} mod{i}", i % 7)})
                .to_string(),
        };
        let mut a = msg(id, Role::Assistant, String::new());
        a.tool_calls = vec![call];
        push(a, &mut used);
        id += 1;
        let mut body = format!(
            "running 12 tests\nerror[E0308]: mismatched types in src/mod{i}.rs:{}\n",
            i * 3
        );
        for k in 0..40 {
            body.push_str(&format!(
                "test mod{i}::case_{k} ... {}\n",
                if k % 9 == 0 { "FAILED" } else { "ok" }
            ));
        }
        body.push_str(if i % 3 == 0 {
            "exit code 0\n"
        } else {
            "exit code 101\n"
        });
        let mut t = msg(id, Role::Tool, body);
        t.tool_call_id = Some(format!("c{i}"));
        t.tool_name = Some("terminal".into());
        push(t, &mut used);
        id += 1;
        push(
            msg(
                id,
                Role::Assistant,
                format!("Fixed the type in src/mod{i}.rs; TypeError gone, tests pass."),
            ),
            &mut used,
        );
        id += 1;
        i += 1;
    }
    out
}

fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], *v.last().unwrap_or(&0.0))
}

fn bench_projection() -> Vec<Value> {
    let mut out = Vec::new();
    for tokens in [10_000usize, 75_000, 300_000] {
        let msgs = transcript(tokens);
        // The window this middle would be 75 % of.
        let budget = projection_budget_chars(tokens * 4 / 3);
        let mut times = Vec::new();
        let mut len = 0;
        for _ in 0..RUNS {
            let t = Instant::now();
            let p = project(&msgs, None, budget);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            len = p.chars().count();
        }
        let (median, max) = stats(times);
        println!("projection {tokens:>7} tokens ({:>6} messages): median {median:.3} ms, max {max:.3} ms, {len} chars out", msgs.len());
        out.push(
            json!({"window_tokens": tokens, "messages": msgs.len(), "runs": RUNS,
            "median_ms": median, "max_ms": max, "projection_chars": len, "budget_chars": budget}),
        );
    }
    out
}

const WORDS: [&str; 16] = [
    "build", "deploy", "error", "parser", "config", "retry", "socket", "timeout", "cache", "index",
    "schema", "lease", "token", "shard", "queue", "backup",
];

async fn fill(store: &Arc<dyn Store>, rows: usize) -> anyhow::Result<f64> {
    let started = Instant::now();
    let per_session = 1_000;
    let batch = 10_000;
    // Unique per run, so a shared Postgres can be benchmarked twice.
    let run = uuid::Uuid::new_v4().simple().to_string();
    let lane = format!("bench:{}", &run[..8]);
    let lane = lane.as_str();
    let lease = store
        .lease_acquire(lane, "bench", Duration::from_secs(3600))
        .await?
        .expect("lease");
    let mut written = 0;
    let mut session_no = 0;
    while written < rows {
        let id = format!("bench-{}-{session_no}", &run[..8]);
        let s = Session {
            id: id.clone(),
            lane: lane.into(),
            parent_id: None,
            started_at: 1,
            ended_at: None,
            end_reason: None,
            system_prompt: String::new(),
            model: "bench".into(),
            compaction_strikes: 0,
            fallback_streak: 0,
            breaker_blocked_since: None,
            cooldown_until: None,
        };
        store.session_create(&lease, &s).await?;
        let mut left = per_session.min(rows - written);
        while left > 0 {
            let n = left.min(batch);
            let msgs: Vec<NewMessage> = (0..n)
                .map(|k| {
                    let x = written + k;
                    let text = format!(
                        "{} {} {} ticket{} {}",
                        WORDS[x % 16],
                        WORDS[(x / 16) % 16],
                        WORDS[(x / 256) % 16],
                        x % 5_000,
                        if x % 100_000 == 7 { "zanzibar" } else { "" }
                    );
                    NewMessage::new(
                        if x % 2 == 0 {
                            Role::User
                        } else {
                            Role::Assistant
                        },
                        text,
                    )
                })
                .collect();
            store.append_messages(&lease, &id, &msgs).await?;
            written += n;
            left -= n;
        }
        store.session_close(&lease, &id, "bench").await?;
        session_no += 1;
    }
    Ok(started.elapsed().as_secs_f64())
}

async fn bench_search(name: &str, store: Arc<dyn Store>, rows: usize) -> anyhow::Result<Value> {
    store.migrate().await?;
    let fill_secs = fill(&store, rows).await?;
    println!("{name}: wrote {rows} messages in {fill_secs:.1} s");
    let mut results = Vec::new();
    for q in ["zanzibar", "ticket4242", "parser timeout", "build"] {
        let mut times = Vec::new();
        let mut hits = 0;
        for _ in 0..RUNS {
            let t = Instant::now();
            hits = store.search(q, &[], 5).await?.len();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let (median, max) = stats(times);
        println!("{name} search {q:>16}: median {median:.2} ms, max {max:.2} ms ({hits} hits)");
        results.push(json!({"query": q, "median_ms": median, "max_ms": max, "hits": hits}));
    }
    store.close().await;
    Ok(json!({"backend": name, "rows": rows, "fill_secs": fill_secs, "queries": results}))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rows: usize = std::env::var("BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let projection = bench_projection();
    let dir = tempfile::tempdir()?;
    let sqlite = store::connect(&format!("sqlite://{}/bench.db", dir.path().display()), 2).await?;
    let mut search = vec![bench_search("sqlite", sqlite, rows).await?];
    if let Ok(url) = std::env::var("DATABASE_URL") {
        let pg = store::connect(&url, 4).await?;
        search.push(bench_search("postgres", pg, rows).await?);
    }
    std::fs::create_dir_all("bench-results")?;
    let report = json!({"projection": projection, "search": search,
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" }});
    std::fs::write(
        "bench-results/context.json",
        serde_json::to_string_pretty(&report)?,
    )?;
    println!("wrote bench-results/context.json");
    Ok(())
}
