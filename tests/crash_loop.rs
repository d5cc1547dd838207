//! The crash loop, bounded for the test suite: the `herald` binary under a chat load across
//! several lanes is SIGKILLed five times at random moments and restarted on the same store
//! (SQLite, or Postgres when `DATABASE_URL` is set). Afterwards the store must show every
//! message answered exactly once, no reply row twice and no two turns of a lane at once.
//! `cargo run --example crash_loop` runs the long version and writes a report.

#[path = "support/fake_llm.rs"]
#[allow(dead_code)]
mod fake_llm;
#[path = "support/promise/mod.rs"]
mod promise;

use std::time::Duration;

use promise::crash::{run, CrashSpec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_sigkills_under_load_lose_and_duplicate_nothing() {
    let outcome = run(&CrashSpec {
        lanes: 6,
        min_per_lane: 4,
        kills: 5,
        life_ms: (400, 2500),
        model_jitter: Duration::from_millis(150),
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
