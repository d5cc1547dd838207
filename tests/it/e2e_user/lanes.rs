//! Item 4 of issue 15: a panicking turn does not pin its lane (item 3, media, lives in
//! `e2e_media.rs` now that files are read). Same harness as the parent file.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald::app::App;
use herald::domain::LaneKey;

use herald_test_support::db::Db;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, test_config, wait_until, Client};

// ---- 4. A panicking turn does not pin its lane ----

async fn a_panicking_turn_does_not_pin_the_lane(db: Db) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.web.reply_timeout_secs = 15;
    // The retried turn answers its own message only (a retry would take the next one in).
    config.lanes.mid_turn = herald::config::MidTurn::Queue;
    db.apply(&mut config);
    let ttl = Duration::from_secs(config.lanes.lease_ttl_secs);
    let app = App::start(config).await.unwrap();
    let client = Arc::new(Client::new(&app));
    let lane = "web:panic";
    assert_eq!(client.chat(lane, "hello").await.0, 200);

    let boom = format!("boom {}", uuid::Uuid::new_v4());
    herald::lanes::fault::panic_once_on(&boom);
    let c = client.clone();
    let b = boom.clone();
    let first = tokio::spawn(async move { c.chat(lane, &b).await });
    // The turn started (its attempt is stored before anything of it can crash), then panicked.
    wait_until(
        "the panicking turn to start",
        Duration::from_secs(10),
        || async {
            app.store
                .inbox_pending(&LaneKey::new(lane), 8)
                .await
                .unwrap()
                .iter()
                .any(|r| r.event.text == boom && r.attempts >= 1)
        },
    )
    .await;

    let started = Instant::now();
    let (status, body) = client.chat(lane, "are you still there?").await;
    let took = started.elapsed();
    println!("the next message was answered {took:?} after the panic (lease expiry {ttl:?})");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "reply to: are you still there?");
    assert!(
        took < ttl,
        "the next message waited {took:?}, the lease expiry is {ttl:?}"
    );
    // The message whose turn panicked was kept and answered on its retry.
    let (status, body) = first.await.unwrap();
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("done")),
        "{body}"
    );
    let (_, metrics) = client.get("/metrics").await;
    assert!(metrics.contains("herald_turn_panics_total"), "{metrics}");
    app.shutdown().await;
}

herald_test_support::on_each_backend!(
    panicking_turn_does_not_pin_the_lane_sqlite,
    panicking_turn_does_not_pin_the_lane_postgres,
    a_panicking_turn_does_not_pin_the_lane
);
