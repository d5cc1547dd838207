//! Replicas share the work: two `herald` processes on one Postgres schema, one of them polling
//! Telegram. Lanes the poller takes in run on both replicas, in proportion to their free
//! worker slots; a web message sent to the replica without the lane's lease is answered by the
//! holder at once, not after a rescan; `/stop` sent to one replica stops the turn running on
//! the other.
//!
//! Runs only when `DATABASE_URL` is set.

use std::collections::HashMap;
use std::time::Duration;

use herald_test_support::harness::wait_until;
use herald_test_support::{fake_llm, promise};
use serde_json::{json, Value};
use sqlx::Connection;

use fake_llm::{FakeLlm, Step};
use promise::daemon::{herald_bin, Backend, Daemon, Spec};
use promise::telegram::TelegramChannel;

/// Turns per replica, from the store: a turn's holder is `<replica id>/<worker>`.
async fn turns_by_replica(backend: &Backend) -> HashMap<String, usize> {
    let mut db = sqlx::PgConnection::connect(&backend.url).await.unwrap();
    let holders: Vec<(String,)> = sqlx::query_as("SELECT holder FROM turns")
        .fetch_all(&mut db)
        .await
        .unwrap();
    let mut out = HashMap::new();
    for (h,) in holders {
        let replica = h.split('/').next().unwrap().to_string();
        *out.entry(replica).or_default() += 1;
    }
    out
}

/// Waits until the daemon has heard from `n` other replicas (`herald_replica_peers`).
async fn wait_for_peers(d: &Daemon, n: usize) {
    let url = format!("{}/metrics", d.spec.base_url());
    wait_until(
        "the replicas to hear each other",
        Duration::from_secs(20),
        || {
            let url = url.clone();
            async move {
                let Ok(r) = reqwest::get(&url).await else {
                    return false;
                };
                let text = r.text().await.unwrap_or_default();
                text.lines()
                    .any(|l| l.trim() == format!("herald_replica_peers {n}"))
            }
        },
    )
    .await;
}

async fn say(base: &str, lane: &str, text: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{base}/api/v1/chat"))
        .json(&json!({"lane": lane, "text": text}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

fn spec(name: &str, backend: &Backend, llm: &FakeLlm) -> Spec {
    Spec::new(&herald_bin(), name, backend, &llm.base_url())
        .set("HERALD_STREAMING__ENABLED", "false")
        .set("HERALD_TELEGRAM__PACING", "false")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pollers_chats_run_on_both_replicas() {
    let Ok(admin_url) = std::env::var("DATABASE_URL") else {
        herald_test_support::skip_or_fail("replicas_share_pg: DATABASE_URL not set");
        return;
    };
    promise::init();
    let llm = FakeLlm::start().await;
    llm.set_default_delay(Duration::from_millis(40));
    let backend = Backend::postgres(&admin_url).await;
    let tg = TelegramChannel::start().await;
    let with_tg = |s: Spec| {
        tg.daemon_env()
            .into_iter()
            .fold(s, |s, (k, v)| s.set(&k, &v))
            // Only the wake signals spread the lanes: no rescan within the test.
            .set("HERALD_LANES__RESCAN_SECS", "600")
    };
    let poller = Daemon::start(&with_tg(spec("p1", &backend, &llm)), 0).await;
    let fake = tg.fake();
    wait_until("p1 to poll", Duration::from_secs(30), || async {
        !fake.calls("getUpdates").is_empty()
    })
    .await;
    let other = Daemon::start(&with_tg(spec("p2", &backend, &llm)), 0).await;
    wait_for_peers(&poller, 1).await;
    wait_for_peers(&other, 1).await;

    const CHATS: i64 = 40;
    const ROUNDS: usize = 3;
    for round in 1..=ROUNDS {
        for chat in 0..CHATS {
            fake.push_private_text(9200 + chat, 9200 + chat, &format!("m{chat}-{round}"));
        }
        fake.wait_for_sent(CHATS as usize * round, Duration::from_secs(60))
            .await;
    }
    let sent = fake.sent_messages();
    for chat in 0..CHATS {
        for round in 1..=ROUNDS {
            let want = format!("reply to: m{chat}-{round}");
            let n = sent.iter().filter(|m| m.text == want).count();
            assert_eq!(n, 1, "{want} sent {n} times");
        }
    }
    assert_eq!(sent.len(), CHATS as usize * ROUNDS, "{sent:#?}");

    let by = turns_by_replica(&backend).await;
    let total: usize = by.values().sum();
    assert_eq!(total, CHATS as usize * ROUNDS, "{by:?}");
    let (p1, p2) = (
        by.get(&Daemon::replica_id(&poller.spec, 0))
            .copied()
            .unwrap_or(0),
        by.get(&Daemon::replica_id(&other.spec, 0))
            .copied()
            .unwrap_or(0),
    );
    println!("turns: poller {p1}, other {p2}");
    assert!(
        p1.min(p2) * 4 >= total,
        "the less busy replica ran under a quarter of the turns: poller {p1}, other {p2}"
    );
    drop((poller, other));
    backend.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_message_on_the_replica_without_the_lease_is_answered_by_the_holder() {
    let Ok(admin_url) = std::env::var("DATABASE_URL") else {
        herald_test_support::skip_or_fail("replicas_share_pg: DATABASE_URL not set");
        return;
    };
    promise::init();
    let llm = FakeLlm::start().await;
    let backend = Backend::postgres(&admin_url).await;
    // No rescan and a long idle: only the wake signal can bring the holder's idle worker back.
    let spec = |name: &str| {
        spec(name, &backend, &llm)
            .set("HERALD_LANES__RESCAN_SECS", "600")
            .set("HERALD_LANES__IDLE_SECS", "600")
            .set("HERALD_LANES__LEASE_TTL_SECS", "30")
            .set("HERALD_WEB__REPLY_TIMEOUT_SECS", "15")
    };
    let a = Daemon::start(&spec("w1"), 0).await;
    let b = Daemon::start(&spec("w2"), 0).await;
    wait_for_peers(&a, 1).await;
    wait_for_peers(&b, 1).await;

    let (status, body) = say(&a.spec.base_url(), "web:shared", "one").await;
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("reply to: one"))
    );
    // Placement chose a replica for the new lane; its worker now idles holding the lease.
    let by = turns_by_replica(&backend).await;
    let (holder, other) = if by.contains_key(&Daemon::replica_id(&a.spec, 0)) {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let holder_id = Daemon::replica_id(&holder.spec, 0);
    let (status, body) = say(&other.spec.base_url(), "web:shared", "two").await;
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("reply to: two")),
        "{body}"
    );
    let by = turns_by_replica(&backend).await;
    assert_eq!(
        by.get(&holder_id),
        Some(&2),
        "both turns under one lease: {by:?}"
    );

    // `/stop` through the other replica stops the turn the holder runs.
    llm.push(Step::Delay(
        Duration::from_secs(60),
        Box::new(Step::Reply("never sent".into())),
    ));
    let before = llm.request_count();
    let slow = tokio::spawn({
        let base = holder.spec.base_url();
        async move { say(&base, "web:shared", "think slowly").await }
    });
    wait_until("the slow model call", Duration::from_secs(10), || async {
        llm.request_count() > before
    })
    .await;
    let (status, body) = say(&other.spec.base_url(), "web:shared", "/stop").await;
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("Stopped.")),
        "{body}"
    );
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), slow)
        .await
        .expect("the stopped turn's request ends")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert_ne!(body["reply"].as_str(), Some("never sent"), "{body}");
    drop((a, b));
    backend.cleanup().await;
}
