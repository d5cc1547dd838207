//! Store benchmark: what one turn costs the store alone, through the `Store` trait, on SQLite
//! (a temporary file) and on Postgres (a fresh schema of `DATABASE_URL`, when set).
//!
//! A turn here is what a worker and the sender ask of the store for one plain message: the
//! inbox insert, the lane's pending read, the session, context and history reads, the turn
//! start (lease-checked, attempt counted), the commit (the user and assistant rows, one reply
//! chunk, the inbox mark), the sender's claim and `mark_sent`. One lane, one lease, a new
//! session every [`SESSION_TURNS`] turns (so the history read stays the size a chat's is), turns
//! one after another, so the figures are the store's own path with no queueing. CPU per turn is
//! the process's (user + system, every thread: SQLite runs on sqlx's worker threads, in 10 ms
//! ticks from /proc). Allocations are counted by the same counting allocator as the load
//! benchmark's (`telemetry::alloc_count`), over the whole process (the SQLite worker thread and
//! the Postgres driver included).
//!
//! Run: `cargo run --release --example bench_store` (`BENCH_TURNS`, default 2000). Prints a
//! table: turns, µs per turn (median and p99 of the turns), process CPU µs per turn,
//! allocations and KiB per turn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald::domain::{MessageEvent, Platform, Role};
use herald::store::{
    InboxAttempt, InboxInsert, InboxStatus, NewMessage, NewOutbox, OutboxKey, Session, Store,
    TurnCommit,
};
use herald::telemetry::alloc_count::{totals, CountingAlloc};
use herald_test_support::telegram_load::proc::ProcStats;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const LANE: &str = "web:bench";
const WARM_UP: usize = 50;
/// Turns per session: a chat's history in the load benchmark's 100 × 20 run.
const SESSION_TURNS: usize = 20;

struct Figures {
    turns: usize,
    median_us: f64,
    p99_us: f64,
    cpu_us: f64,
    allocs: f64,
    kib: f64,
}

/// Process CPU time (user + system, every thread) so far, in microseconds.
fn cpu_us() -> f64 {
    ProcStats::read(std::process::id()).cpu_s * 1e6
}

fn session_for(n: usize) -> herald::domain::SessionId {
    format!("bench-session-{}", n / SESSION_TURNS).into()
}

/// Opens turn `n`'s session when it starts a new one (closing the last).
async fn rotate(store: &Arc<dyn Store>, lease: &herald::store::Lease, n: usize) {
    if !n.is_multiple_of(SESSION_TURNS) {
        return;
    }
    if n > 0 {
        store
            .session_close(lease, &session_for(n - 1), "bench")
            .await
            .expect("session_close");
    }
    let session = Session::new(
        session_for(n).to_string(),
        LANE.into(),
        herald::store::now_ms(),
        "You are Herald.".to_string(),
        "bench-model".to_string(),
    );
    store
        .session_create(lease, &session)
        .await
        .expect("session_create");
}

/// One plain turn, receipt to `mark_sent`; `n` keeps each message's platform id unique.
async fn turn(store: &Arc<dyn Store>, lease: &herald::store::Lease, n: usize) {
    rotate(store, lease, n).await;
    let ev = MessageEvent::text(Platform::WEB, "bench", "alice", &format!("message {n}"));
    let inbox_id = match store.inbox_insert(&ev).await.expect("inbox_insert") {
        InboxInsert::Inserted(id) | InboxInsert::Duplicate(id) => id,
    };
    let lane = herald::domain::LaneKey::from(LANE);
    let pending = store.inbox_pending(&lane, 16).await.expect("inbox_pending");
    assert_eq!(pending.len(), 1, "one pending event per turn");
    let session = store.session_current(&lane).await.expect("session_current");
    let session_id = session.expect("an open session").id;
    store.context_get(&session_id).await.expect("context_get");
    let history = store.messages(&session_id, true).await.expect("messages");
    assert_eq!(
        history.len(),
        2 * (n % SESSION_TURNS),
        "the session's history"
    );
    let turn_id = store
        // As the worker does: the sweep of this lease's unfinished turns only after a failed
        // attempt (it walks the lane's turns).
        .turn_begin_with(
            lease,
            &session_id,
            Some(InboxAttempt::first(inbox_id)),
            false,
        )
        .await
        .expect("turn_begin");
    let reply = NewOutbox {
        key: OutboxKey::Single(format!("bench:{n}")),
        lane: LANE.into(),
        platform: Platform::WEB,
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
    let claimed = store
        .outbox_claim(
            "bench-sender",
            &["web".to_string()],
            32,
            Duration::from_secs(60),
        )
        .await
        .expect("outbox_claim");
    assert_eq!(claimed.len(), 1, "the turn's one reply");
    store
        .outbox_mark_sent(claimed[0].id, "sent")
        .await
        .expect("outbox_mark_sent");
}

async fn measure(store: Arc<dyn Store>, turns: usize) -> Figures {
    store.migrate().await.expect("migrate");
    let lease = store
        .lease_acquire(LANE, "bench-worker", Duration::from_secs(3600))
        .await
        .expect("lease_acquire")
        .expect("a free lease");
    for n in 0..WARM_UP {
        turn(&store, &lease, n).await;
    }
    let mut took = Vec::with_capacity(turns);
    let ((calls0, bytes0), cpu0) = (totals(), cpu_us());
    for n in WARM_UP..WARM_UP + turns {
        let started = Instant::now();
        turn(&store, &lease, n).await;
        took.push(started.elapsed().as_secs_f64() * 1e6);
    }
    let ((calls1, bytes1), cpu1) = (totals(), cpu_us());
    store.close().await;
    took.sort_by(f64::total_cmp);
    Figures {
        turns,
        median_us: took[took.len() / 2],
        p99_us: took[(took.len() * 99 / 100).min(took.len() - 1)],
        cpu_us: (cpu1 - cpu0) / turns as f64,
        allocs: (calls1 - calls0) as f64 / turns as f64,
        kib: (bytes1 - bytes0) as f64 / turns as f64 / 1024.0,
    }
}

fn row(backend: &str, f: &Figures) {
    println!(
        "{backend:<9} {:>6} {:>10.0} {:>10.0} {:>12.0} {:>12.0} {:>10.1}",
        f.turns, f.median_us, f.p99_us, f.cpu_us, f.allocs, f.kib
    );
}

#[tokio::main]
async fn main() {
    // `RUST_LOG=sqlx::query=debug` logs every statement with its time, to find a slow one.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let turns: usize = std::env::var("BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    println!(
        "{:<9} {:>6} {:>10} {:>10} {:>12} {:>12} {:>10}",
        "backend", "turns", "median µs", "p99 µs", "CPU µs/turn", "allocs/turn", "KiB/turn"
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
