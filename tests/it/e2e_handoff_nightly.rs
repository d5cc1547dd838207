//! The nightly closer end to end: the real core on 127.0.0.1:0, conversations through the web
//! adapter, the fake model as both chat model and capsule writer, and a pass run at a chosen
//! instant (two hours after the conversation went quiet) through `App::nightly`.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use herald::app::App;
use herald::domain::SessionId;
use herald::domain::{LaneKey, Role};
use herald::handoff::PassKind;
use herald::store::{now_ms, NewMessage, Session};
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::handoff::{assert_capsule_received_once, assert_writer_request};
use herald_test_support::harness::{init, test_config, wait_for, Client};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const CAPSULE: &str = "## Working on\nMoving the photo backups to the new disk.\n\n\
## State\nHalf of the albums are copied; checksums match so far.\n\n\
## Decisions\nKeep the old disk read-only until every checksum matches.\n\n\
## Pointers\nThe copy script is backup.sh.\n\n\
## Next\nCopy the remaining albums and compare checksums.\n";

/// Six messages: three questions, three replies.
async fn converse(client: &Client, lane: &str) {
    for text in [
        "I am moving the photo backups to the new disk.",
        "Half of the albums are copied now.",
        "The checksums match so far.",
    ] {
        let (status, body) = client.chat(lane, text).await;
        assert_eq!(status, 200, "{body}");
    }
}

async fn capsule(client: &Client, lane: &str) -> Value {
    let (status, body) = client.get(&format!("/api/v1/lanes/{lane}/capsule")).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

async fn wait_closed(app: &App, session_id: &str) -> String {
    wait_for(
        "the session to close",
        Duration::from_secs(10),
        async || {
            let s = app
                .store
                .session_get(&SessionId::from(session_id))
                .await
                .unwrap()
                .unwrap();
            s.end_reason
        },
    )
    .await
}

/// Outbox rows of a lane: the replies, plus any note the build sent into the chat.
async fn outbox_texts(app: &App, lane: &str) -> Vec<String> {
    let rows = app.store.outbox_recent(200).await.unwrap();
    rows.into_iter()
        .filter(|r| r.lane == lane)
        .map(|r| r.text)
        .collect()
}

/// A cron lane's session with six messages, written the way its worker would (under its lease).
async fn cron_lane_with_dialogue(app: &App, lane: &str) {
    let lease = app
        .store
        .lease_acquire(lane, "test", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let session = Session::new(
        format!("s-{}", uuid::Uuid::new_v4().simple()),
        lane.into(),
        now_ms(),
        "sys",
        "m",
    );
    app.store.session_create(&lease, &session).await.unwrap();
    let msgs: Vec<NewMessage> = (0..6)
        .map(|i| {
            NewMessage::new(
                if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                "brief",
            )
        })
        .collect();
    app.store
        .append_messages(&lease, &session.id, &msgs)
        .await
        .unwrap();
    app.store.lease_release(&lease).await.unwrap();
}

#[tokio::test]
async fn an_idle_conversation_is_closed_into_a_capsule_that_the_next_session_gets_once() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    // The scheduled loop stays off (the default, said here on purpose): the test runs the
    // night's pass itself, at a chosen instant.
    config.handoff.nightly = String::new();
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);
    let lane = LaneKey::new("web:n");
    converse(&client, "web:n").await;
    // A scheduled job's lane with as much dialogue is never closed.
    cron_lane_with_dialogue(&app, "cron:brief").await;
    let old = app.store.session_current(&lane).await.unwrap().unwrap().id;
    let before = llm.request_count();

    llm.push(Step::Reply(CAPSULE.into()));
    let night = Utc::now() + TimeDelta::hours(2);
    let cancel = CancellationToken::new();
    let report = app
        .nightly
        .pass(night, PassKind::Scheduled(night), &cancel)
        .await
        .unwrap();
    assert_eq!(report.builds, vec![("web:n".to_string(), "ok".to_string())]);
    assert_eq!(llm.request_count(), before + 1, "one writer call");
    let writer = llm.requests()[before].clone();
    assert_writer_request(&writer, "The checksums match so far.");

    let c = capsule(&client, "web:n").await;
    assert_eq!(
        (
            c["status"].as_str(),
            c["session_id"].as_str(),
            c["pending"].as_bool()
        ),
        (Some("ok"), Some(old.as_str()), Some(true)),
        "{c}"
    );
    assert_eq!(wait_closed(&app, &old).await, "nightly");
    assert!(app
        .store
        .session_current(&LaneKey::new("cron:brief"))
        .await
        .unwrap()
        .is_some_and(|s| s.ended_at.is_none()));
    // Nobody asked for this capsule: nothing is said in the chat (the three replies only).
    assert_eq!(outbox_texts(&app, "web:n").await.len(), 3);

    // The same night again (a restart, a second replica): nothing more is written.
    let again = app
        .nightly
        .pass(night, PassKind::Scheduled(night), &cancel)
        .await
        .unwrap();
    assert!(again.already_done && again.builds.is_empty(), "{again:?}");

    let (_, body) = client.chat("web:n", "Good morning, where were we?").await;
    assert_ne!(
        body["session_id"].as_str(),
        Some(old.as_str()),
        "a new session"
    );
    assert_eq!(capsule(&client, "web:n").await["pending"], false);

    client.chat("web:n", "Then let us copy the rest.").await;
    let requests = llm.requests();
    assert_capsule_received_once(
        &requests[before + 1],
        "Good morning, where were we?",
        "Copy the remaining albums",
        &requests[before + 2],
        "Then let us copy the rest.",
    );

    // The next night finds nothing: the new session is neither long nor idle enough.
    let next = night + TimeDelta::days(1);
    let report = app
        .nightly
        .pass(next, PassKind::Scheduled(next), &cancel)
        .await
        .unwrap();
    assert_eq!(report.candidates, 0, "{report:?}");

    let (_, metrics) = client.get("/metrics").await;
    assert!(
        metrics.contains("herald_handoff_nightly_total{status=\"ok\"}"),
        "{metrics}"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_failed_writer_at_night_is_degraded_in_the_api_and_silent_in_the_chat() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.handoff.nightly = String::new();
    config.handoff.nightly_cap = 1;
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);
    converse(&client, "web:g").await;
    converse(&client, "web:later").await;
    let old = app
        .store
        .session_current(&LaneKey::new("web:g"))
        .await
        .unwrap()
        .unwrap()
        .id;

    llm.push(Step::Reply("sure, here is a summary".into()));
    let night = Utc::now() + TimeDelta::hours(2);
    let report = app
        .nightly
        .pass(night, PassKind::Scheduled(night), &CancellationToken::new())
        .await
        .unwrap();
    // The cap of one takes the longest-idle conversation and leaves the other for later.
    assert_eq!(
        report.builds,
        vec![("web:g".to_string(), "degraded".to_string())]
    );
    assert_eq!(report.candidates, 1);
    let c = capsule(&client, "web:g").await;
    assert_eq!(c["status"], "degraded", "{c}");
    assert_eq!(wait_closed(&app, &old).await, "nightly");
    assert_eq!(
        outbox_texts(&app, "web:g").await.len(),
        3,
        "no note in the chat"
    );
    let (status, _) = client.get("/api/v1/lanes/web:later/capsule").await;
    assert_eq!(status, 404, "beyond the cap");
    app.shutdown().await;
}
