//! Store benchmark: what one turn costs the store alone, through the `Store` trait, on SQLite
//! (a temporary file) and on Postgres (a fresh schema of `DATABASE_URL`, when set).
//!
//! A turn here is what a worker asks of the store for one plain message: the inbox insert, the
//! turn start (lease-checked, attempt counted) and the commit (the user and assistant rows, one
//! reply chunk, the inbox mark). One lane, one lease, one session, turns one after another, so
//! the figures are the store's own path with no queueing. Allocations are counted by the same
//! counting allocator as the load benchmark's (`telemetry::alloc_count`), over the whole process
//! (the SQLite worker thread and the Postgres driver included).
//!
//! Run: `cargo run --release --example bench_store` (`BENCH_TURNS`, default 2000). Prints a
//! table: turns, µs per turn (median and p99 of the turns), allocations and KiB per turn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald::domain::{MessageEvent, Platform, Role};
use herald::store::{
    InboxAttempt, InboxInsert, InboxStatus, NewMessage, NewOutbox, OutboxKey, Session, Store,
    TurnCommit,
};
use herald::telemetry::alloc_count::{totals, CountingAlloc};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const LANE: &str = "web:bench";
const WARM_UP: usize = 50;

struct Figures {
    turns: usize,
    median_us: f64,
    p99_us: f64,
    allocs: f64,
    kib: f64,
}

/// One plain turn, start to commit; `n` keeps each message's platform id unique.
async fn turn(store: &Arc<dyn Store>, lease: &herald::store::Lease, n: usize) {
    let ev = MessageEvent::text(Platform::Web, "bench", "alice", &format!("message {n}"));
    let inbox_id = match store.inbox_insert(&ev).await.expect("inbox_insert") {
        InboxInsert::Inserted(id) | InboxInsert::Duplicate(id) => id,
    };
    let session_id = "bench-session".into();
    let turn_id = store
        .turn_begin(lease, &session_id, Some(InboxAttempt::first(inbox_id)))
        .await
        .expect("turn_begin");
    let reply = NewOutbox {
        key: OutboxKey::Single(format!("bench:{n}")),
        lane: LANE.into(),
        platform: Platform::Web,
        chat_id: "bench".to_string(),
        thread_id: None,
        reply_to: None,
        inbox_id: Some(inbox_id),
        chunk_index: 0,
        text: format!("echo: message {n}"),
        media: None,
    };
    let commit = TurnCommit {
        turn_id,
        session_id,
        messages: vec![
            NewMessage::new(Role::User, format!("message {n}")),
            NewMessage::new(Role::Assistant, format!("echo: message {n}")),
        ],
        outbox: vec![reply],
        inbox_id: Some(inbox_id),
        steered: Vec::new(),
        inbox_status: InboxStatus::Done,
        note: None,
        close_session: None,
        enqueue: Vec::new(),
        billed: Default::default(),
        cost: None,
    };
    store
        .turn_commit(lease, &commit)
        .await
        .expect("turn_commit");
}

async fn measure(store: Arc<dyn Store>, turns: usize) -> Figures {
    store.migrate().await.expect("migrate");
    let lease = store
        .lease_acquire(LANE, "bench-worker", Duration::from_secs(3600))
        .await
        .expect("lease_acquire")
        .expect("a free lease");
    let session = Session::new(
        "bench-session".to_string(),
        LANE.into(),
        herald::store::now_ms(),
        "You are Herald.".to_string(),
        "bench-model".to_string(),
    );
    store
        .session_create(&lease, &session)
        .await
        .expect("session_create");
    for n in 0..WARM_UP {
        turn(&store, &lease, n).await;
    }
    let mut took = Vec::with_capacity(turns);
    let (calls0, bytes0) = totals();
    for n in WARM_UP..WARM_UP + turns {
        let started = Instant::now();
        turn(&store, &lease, n).await;
        took.push(started.elapsed().as_secs_f64() * 1e6);
    }
    let (calls1, bytes1) = totals();
    store.close().await;
    took.sort_by(f64::total_cmp);
    Figures {
        turns,
        median_us: took[took.len() / 2],
        p99_us: took[(took.len() * 99 / 100).min(took.len() - 1)],
        allocs: (calls1 - calls0) as f64 / turns as f64,
        kib: (bytes1 - bytes0) as f64 / turns as f64 / 1024.0,
    }
}

fn row(backend: &str, f: &Figures) {
    println!(
        "{backend:<9} {:>6} {:>10.0} {:>10.0} {:>12.0} {:>10.1}",
        f.turns, f.median_us, f.p99_us, f.allocs, f.kib
    );
}

#[tokio::main]
async fn main() {
    let turns: usize = std::env::var("BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    println!(
        "{:<9} {:>6} {:>10} {:>10} {:>12} {:>10}",
        "backend", "turns", "median µs", "p99 µs", "allocs/turn", "KiB/turn"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}/bench.db", dir.path().display());
    let store = herald::store::connect(&url, 4).await.expect("open sqlite");
    row("sqlite", &measure(store, turns).await);
    if std::env::var("DATABASE_URL").is_ok() {
        herald_test_support::backends::in_fresh_pg_schema("herald_bench", |url| async move {
            let store = herald::store::connect(&url, 4)
                .await
                .expect("open postgres");
            row("postgres", &measure(store, turns).await);
            Ok(())
        })
        .await;
    }
}
