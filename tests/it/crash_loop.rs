//! The crash loop, bounded for the test suite: the `herald` binary under a chat load across
//! several lanes is SIGKILLed five times at random moments and restarted on the same store
//! (SQLite, or Postgres when `DATABASE_URL` is set). Afterwards the store must show every
//! message answered exactly once, no reply row twice and no two turns of a lane at once.
//! The load comes through the web chat API, and again through the fake Telegram Bot API so
//! the poller's stored offset, the outbox send and `mark_sent` are crashed too; there the
//! users' own view (replies recorded by the fake) must agree.
//! `cargo run --example crash_loop` runs the long version and writes a report.

use std::time::Duration;

use herald_test_support::promise::crash::{run, CrashSpec, Via};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_sigkills_under_load_lose_and_duplicate_nothing() {
    let outcome = run(&CrashSpec {
        lanes: 6,
        min_per_lane: 4,
        kills: 5,
        life_ms: (400, 2500),
        model_jitter: Duration::from_millis(150),
        via: Via::Web,
    })
    .await;
    println!("{}", serde_json::to_string_pretty(&outcome.report).unwrap());
    let c = &outcome.census;
    c.assert_promise();
    assert!(c.client_messages >= 24, "every lane sent its messages");
    assert_eq!(
        c.inbox_rows, c.client_messages,
        "one inbox row per message, retries deduplicated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_sigkills_while_polling_telegram_answer_every_update_once() {
    let outcome = run(&CrashSpec {
        lanes: 4,
        min_per_lane: 4,
        kills: 5,
        life_ms: (400, 2500),
        model_jitter: Duration::from_millis(150),
        via: Via::Telegram,
    })
    .await;
    println!("{}", serde_json::to_string_pretty(&outcome.report).unwrap());
    outcome.census.assert_promise();
    let r = outcome
        .receipts
        .as_ref()
        .expect("a Telegram run counts receipts");
    assert!(
        r.promise_held(),
        "the users saw a broken promise: {}",
        serde_json::to_string_pretty(r).unwrap()
    );
    assert!(r.updates >= 16, "every chat sent its messages");
    assert_eq!(r.updates, outcome.census.client_messages);
    assert_eq!(
        outcome.census.inbox_rows, r.updates,
        "one inbox row per update, re-read batches deduplicated"
    );
    assert_eq!(
        r.sends,
        r.updates + r.resends_across_a_kill,
        "one reply per update; the only extra sends are resends across a kill"
    );
}
