//! `--replicas 1,2,3`: Herald replicas on one Postgres schema under the closed loop, Telegram in
//! polling mode (one replica holds the poller role), optionally pinned one core each
//! (`--taskset`) and with a slow fake model (`--model-ms`) so that they are busy. Reports the
//! total turns/s and the turns each replica ran, counted from the `turns` table (`holder` is
//! `<replica id>/<uuid>`), and writes `bench-results/load-replicas.json`.
//!
//! Must not: take the driver's view of who answered; the store says which replica ran a turn.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use herald_test_support::telegram_load::proc::loadavg;
use herald_test_support::telegram_load::{RigOpts, Store};
use serde_json::{json, Value};
use sqlx::Connection;

use crate::measure::measure;

pub struct ReplicaArgs {
    pub counts: Vec<usize>,
    pub chats: usize,
    pub messages: usize,
    pub taskset: bool,
    pub model_ms: u64,
    pub timeout: Duration,
    pub herald_bin: Option<std::path::PathBuf>,
}

pub async fn run(args: &ReplicaArgs, dir: &Path) {
    assert!(
        std::env::var("DATABASE_URL").is_ok_and(|u| !u.is_empty()),
        "--replicas runs on Postgres: set DATABASE_URL"
    );
    let load_start = loadavg();
    let mut results = Vec::new();
    for &n in &args.counts {
        let opts = RigOpts {
            bin: args.herald_bin.clone(),
            store: Store::Postgres,
            replicas: n,
            taskset: args.taskset,
            model_delay: Duration::from_millis(args.model_ms),
            ..RigOpts::default()
        };
        let label = format!("herald-postgres-x{n}");
        let m = measure(&label, opts, args.chats, args.messages, args.timeout).await;
        let mut turns = turns_by_replica(&m.rig.backend.url).await;
        for id in m.rig.gateway.replica_ids() {
            turns.entry(id).or_insert(0);
        }
        m.rig.finish().await;
        let total: i64 = turns.values().sum();
        let per_replica: Vec<Value> = turns
            .iter()
            .map(|(id, t)| json!({ "replica": id, "turns": t, "share": *t as f64 / total.max(1) as f64 }))
            .collect();
        let least = turns.values().min().copied().unwrap_or(0) as f64 / total.max(1) as f64;
        println!(
            "{n} replica(s): {:.0} turns/s, {:.3} ms CPU/turn (all replicas), p50 {:.1} ms, p99 {:.1} ms, lost {}, duplicated {}; turns by replica: {}; CPU s by replica: {:?}",
            m.run.turns_per_s,
            m.run.cpu_ms_per_turn,
            m.run.p50_ms,
            m.run.p99_ms,
            m.run.lost,
            m.run.duplicated,
            turns.iter().map(|(id, t)| format!("{id}={t}")).collect::<Vec<_>>().join(" "),
            m.run.cpu_s_per_process.iter().map(|c| (c * 100.0).round() / 100.0).collect::<Vec<_>>(),
        );
        results.push(json!({
            "replicas": n,
            "run": m.run,
            "turns_by_replica": per_replica,
            "least_busy_share": least,
        }));
    }
    let report = json!({
        "benchmark": "telegram load, Herald replicas on one Postgres schema (issue #34)",
        "method": "closed loop after a warm-up, Telegram polling (one poller), pacing off; turns \
                   counted from the turns table by the replica id before '/' in holder (warm-up \
                   turns included); a replica that ran no turn is listed with none",
        "chats": args.chats,
        "messages_per_chat": args.messages,
        "taskset": args.taskset,
        "model_ms": args.model_ms,
        "machine": { "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
                     "loadavg_start": load_start, "loadavg_end": loadavg() },
        "results": results,
    });
    std::fs::create_dir_all(dir).expect("results dir");
    let path = dir.join("load-replicas.json");
    let text = serde_json::to_string_pretty(&report).expect("json");
    std::fs::write(&path, text + "\n").expect("write json");
    eprintln!("wrote {}", path.display());
}

/// Turns per replica id (the part of `holder` before '/').
async fn turns_by_replica(url: &str) -> BTreeMap<String, i64> {
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("connect to the bench schema");
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT split_part(holder, '/', 1), count(*) FROM turns GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .expect("count turns");
    let _ = conn.close().await;
    rows.into_iter().collect()
}
