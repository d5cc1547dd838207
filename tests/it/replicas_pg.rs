//! Three `herald` replicas on one Postgres schema, each on its own port, with the chat load
//! spread over them round robin (every attempt goes to the next replica). One replica is
//! SIGKILLed mid-run and started again. The store must show no lane with two turns at once,
//! no reply twice, and every message answered once — whichever replica took it in or ran it.
//!
//! Runs only when `DATABASE_URL` is set (CI sets it; `scripts/test` starts a private server).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use herald_test_support::{fake_llm, promise};

use fake_llm::FakeLlm;
use promise::census::{self, Kill};
use promise::daemon::{herald_bin, Backend, Daemon, Spec};
use promise::load::{self, LoadSpec, WebChannel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_one_killed_keep_every_lane_single_and_every_reply_single() {
    let Ok(admin_url) = std::env::var("DATABASE_URL") else {
        herald_test_support::skip_or_fail("replicas_pg: DATABASE_URL not set");
        return;
    };
    promise::init();
    let llm = FakeLlm::start().await;
    llm.set_jitter(Duration::from_millis(150));
    let backend = Backend::postgres(&admin_url).await;
    let specs: Vec<Spec> = ["r1", "r2", "r3"]
        .iter()
        .map(|n| Spec::new(&herald_bin(), n, &backend, &llm.base_url()))
        .collect();
    // Start one first so the others find the schema migrated (and then race nothing).
    let mut daemons = Vec::new();
    for s in &specs {
        daemons.push(Some(Daemon::start(s, 0).await));
    }

    let keep_going = Arc::new(AtomicBool::new(true));
    let load = tokio::spawn(load::run(
        WebChannel::new(specs.iter().map(Spec::base_url).collect()),
        LoadSpec {
            lanes: 8,
            min_per_lane: 6,
            keep_going: keep_going.clone(),
            lane_prefix: "rep".into(),
            give_up: Duration::from_secs(60),
        },
    ));

    tokio::time::sleep(Duration::from_millis(2500)).await;
    let victim = daemons[1].take().expect("r2 runs");
    victim.kill();
    let kills = vec![Kill {
        replica: Daemon::replica_id(&specs[1], 0),
        at_ms: chrono::Utc::now().timestamp_millis(),
    }];
    tokio::time::sleep(Duration::from_millis(1500)).await;
    daemons[1] = Some(Daemon::start(&specs[1], 1).await);
    tokio::time::sleep(Duration::from_millis(3000)).await;
    keep_going.store(false, Ordering::Relaxed);

    let sent = load.await.expect("load");
    assert!(
        census::drain(&backend.url, "web", Duration::from_secs(90)).await,
        "work left undone after the load"
    );
    drop(daemons);
    let c = census::take(&backend.url, "web", &sent, &kills).await;
    backend.cleanup().await;
    println!("{}", serde_json::to_string_pretty(&c).unwrap());
    c.assert_promise();
    assert!(c.client_messages >= 48);
    assert_eq!(c.inbox_rows, c.client_messages);
    assert_eq!(c.concurrent_turns, 0);
    let replicas: std::collections::BTreeSet<&str> = c
        .turns_by_replica
        .keys()
        .map(|r| r.split("-g").next().unwrap_or(r))
        .collect();
    assert!(
        replicas.len() >= 2,
        "turns ran on several replicas: {:?}",
        c.turns_by_replica
    );
}
