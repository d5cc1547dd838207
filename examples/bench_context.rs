//! Context benchmark: deterministic projection time for 10k, 75k and 300k-token windows
//! (median and max over 25 runs), and `store.search` latency over a large store, across lanes
//! (the operator's search) and scoped to one big and one small lane (the agent's) (SQLite, and
//! Postgres when `DATABASE_URL` is set).
//!
//! Run: `cargo run --release --example bench_context` (`BENCH_ROWS=200000` for a smaller
//! store; default 1,000,000; `BENCH_ROWS=0` skips the search part). `BENCH_WINDOWS=75000` and
//! `BENCH_RUNS=5` pick the windows and the runs per window (for `valgrind --tool=callgrind`).
//! Prints a table and writes `bench-results/context.json`.

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "support/transcripts.rs"]
mod transcripts;

use herald::agent::compaction::{project, projection_budget_chars};
use herald::domain::SessionId;
use herald::domain::{LaneKey, Role};
use herald::store::{self, NewMessage, SearchScope, Session, Store};
use serde_json::{json, Value};
use transcripts::transcript;

const RUNS: usize = 25;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], *v.last().unwrap_or(&0.0))
}

fn bench_projection() -> Vec<Value> {
    let mut out = Vec::new();
    let runs = env_or("BENCH_RUNS", RUNS).max(1);
    let windows: Vec<usize> = std::env::var("BENCH_WINDOWS")
        .unwrap_or_else(|_| "10000,75000,300000".into())
        .split(',')
        .filter_map(|w| w.trim().parse().ok())
        .collect();
    for tokens in windows {
        let msgs = transcript(tokens);
        // The window this middle would be 75 % of.
        let budget = projection_budget_chars(tokens * 4 / 3);
        let mut times = Vec::new();
        let mut len = 0;
        for _ in 0..runs {
            let t = Instant::now();
            let p = project(&msgs, None, budget);
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            len = p.chars().count();
        }
        let (median, max) = stats(times);
        println!("projection {tokens:>7} tokens ({:>6} messages): median {median:.3} ms, max {max:.3} ms, {len} chars out", msgs.len());
        out.push(
            json!({"window_tokens": tokens, "messages": msgs.len(), "runs": runs,
            "median_ms": median, "max_ms": max, "projection_chars": len, "budget_chars": budget}),
        );
    }
    out
}

const WORDS: [&str; 16] = [
    "build", "deploy", "error", "parser", "config", "retry", "socket", "timeout", "cache", "index",
    "schema", "lease", "token", "shard", "queue", "backup",
];

/// Fills one big lane with `rows` messages and a small lane with 20; returns the time taken and
/// the two lane keys (the agent's search is scoped to one lane, the operator's is not).
async fn fill(store: &Arc<dyn Store>, rows: usize) -> anyhow::Result<(f64, String, String)> {
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
        let s = Session::new(id.clone(), LaneKey::parse(lane), 1, String::new(), "bench");
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
            store
                .append_messages(&lease, &SessionId::from(&id), &msgs)
                .await?;
            written += n;
            left -= n;
        }
        store
            .session_close(&lease, &SessionId::from(&id), "bench")
            .await?;
        session_no += 1;
    }
    // A small conversation next to the big one: a lane-scoped search for a word that is
    // common in the big lane must walk past its matches.
    let small = format!("bench:small-{}", &run[..8]);
    let small_lease = store
        .lease_acquire(&small, "bench", Duration::from_secs(3600))
        .await?
        .expect("lease");
    let id = format!("bench-small-{}", &run[..8]);
    store
        .session_create(
            &small_lease,
            &Session::new(
                id.clone(),
                LaneKey::parse(&small),
                1,
                String::new(),
                "bench",
            ),
        )
        .await?;
    let msgs: Vec<NewMessage> = (0..20)
        .map(|k| NewMessage::new(Role::User, format!("{} small talk {k}", WORDS[k % 16])))
        .collect();
    store
        .append_messages(&small_lease, &SessionId::from(&id), &msgs)
        .await?;
    Ok((started.elapsed().as_secs_f64(), lane.to_string(), small))
}

async fn bench_search(name: &str, store: Arc<dyn Store>, rows: usize) -> anyhow::Result<Value> {
    store.migrate().await?;
    let (fill_secs, big, small) = fill(&store, rows).await?;
    println!("{name}: wrote {rows} messages in {fill_secs:.1} s");
    let (big, small) = (LaneKey::new(&big), LaneKey::new(&small));
    let mut results = Vec::new();
    for (scope_name, scope) in [
        ("all lanes", SearchScope::AllLanes),
        ("big lane", SearchScope::Lane(&big)),
        ("small lane", SearchScope::Lane(&small)),
    ] {
        for q in ["zanzibar", "ticket4242", "parser timeout", "build"] {
            let mut times = Vec::new();
            let mut hits = 0;
            for _ in 0..RUNS {
                let t = Instant::now();
                hits = store.search(scope, q, &[], 5).await?.len();
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            let (median, max) = stats(times);
            println!(
                "{name} search {scope_name:>10} {q:>16}: median {median:.2} ms, max {max:.2} ms ({hits} hits)"
            );
            results.push(json!({"scope": scope_name, "query": q, "median_ms": median,
                "max_ms": max, "hits": hits}));
        }
    }
    store.close().await;
    Ok(json!({"backend": name, "rows": rows, "fill_secs": fill_secs, "queries": results}))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let rows: usize = env_or("BENCH_ROWS", 1_000_000);
    let projection = bench_projection();
    let dir = tempfile::tempdir()?;
    let mut search = Vec::new();
    if rows > 0 {
        let sqlite =
            store::connect(&format!("sqlite://{}/bench.db", dir.path().display()), 2).await?;
        search.push(bench_search("sqlite", sqlite, rows).await?);
        if let Ok(url) = std::env::var("DATABASE_URL") {
            let pg = store::connect(&url, 4).await?;
            search.push(bench_search("postgres", pg, rows).await?);
        }
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
