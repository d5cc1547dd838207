//! Handoff capsules end to end: the real core on 127.0.0.1:0 with a fake model that is both the
//! chat model and the capsule writer, through the web adapter and the admin API.

use std::time::{Duration, Instant};

use herald::app::App;
use herald::domain::SessionId;
use herald::domain::{LaneKey, MessageEvent, Platform};
use herald::handoff::{ACK, ALREADY};
use herald::store::{now_ms, InboxStatus, NewCapsule};
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::handoff::{assert_capsule_received_once, assert_writer_request};
use herald_test_support::harness::{init, settled, test_config, wait_until, Client};
use serde_json::Value;

const CAPSULE: &str = "## Working on\nMaking the nightly mirror job skip unreachable hosts.\n\n\
## State\nThe skip works on host two; reporting is not written yet.\n\n\
## Decisions\nSkip and report, never abort the whole run.\n\n\
## Pointers\nThe job script is mirror.sh, discussed at [#3].\n\n\
## Next\nWrite the report line naming the skipped host.\n";

async fn converse(client: &Client, lane: &str) {
    for text in [
        "The nightly mirror job fails on the second host.",
        "Make it skip unreachable hosts and report which one.",
    ] {
        let (status, _) = client.chat(lane, text).await;
        assert_eq!(status, 200);
    }
}

/// Polls the capsule API until the lane has a build outcome.
async fn capsule(client: &Client, lane: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = client.get(&format!("/api/v1/lanes/{lane}/capsule")).await;
        if status == 200 {
            return serde_json::from_str(&body).unwrap();
        }
        assert_eq!(status, 404, "{body}");
        assert!(
            Instant::now() < deadline,
            "no capsule was written for {lane}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_rotated(app: &App, session_id: &str) {
    let session = || async {
        app.store
            .session_get(&SessionId::from(session_id))
            .await
            .unwrap()
            .unwrap()
    };
    wait_until(
        "the session to be rotated",
        Duration::from_secs(10),
        || async { session().await.ended_at.is_some() },
    )
    .await;
    assert_eq!(session().await.end_reason.as_deref(), Some("handoff"));
}

#[tokio::test]
async fn handoff_writes_a_capsule_and_only_the_next_session_receives_it_once() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.handoff.export_dir = Some(data.path().join("handoffs"));
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);
    let lane = LaneKey::new("web:h");
    converse(&client, "web:h").await;
    let old = app.store.session_current(&lane).await.unwrap().unwrap().id;

    llm.push(Step::Reply(CAPSULE.into()));
    let (status, body) = client.chat("web:h", "Handoff.").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["status"].as_str(), body["reply"].as_str()),
        (Some("skipped"), Some(ACK))
    );

    let c = capsule(&client, "web:h").await;
    assert_eq!(c["status"], "ok", "{c}");
    assert_eq!(c["session_id"], old.as_str());
    assert_eq!(c["pending"], true);
    let text = c["text"].as_str().unwrap();
    assert!(
        text.starts_with("## Working on\nMaking the nightly mirror job"),
        "{text}"
    );
    assert!(text.contains("## Next\nWrite the report line") && text.contains("## Recovery"));
    assert!(
        text.contains(&format!("session_id=\"{old}\"")),
        "Recovery points at the old session"
    );

    // The writer read the dialogue, not the handoff word, and was asked for the five sections.
    let writer = llm.requests()[2].clone();
    assert_writer_request(&writer, "Make it skip unreachable hosts");
    assert!(!writer.last_user().contains("Handoff."));

    wait_rotated(&app, &old).await;
    // Exported before the rotation, for file-based watchdogs.
    let exported = std::fs::read_to_string(data.path().join("handoffs/handoff-web:h.md")).unwrap();
    assert_eq!(exported, text);
    // The summarized session never receives its own capsule; the marker stays.
    let own = app
        .store
        .pending_consume(&lane, &old, Duration::from_secs(36 * 3600), now_ms())
        .await
        .unwrap();
    assert_eq!(own.capsule, None);
    assert_eq!(capsule(&client, "web:h").await["pending"], true);

    let (_, body) = client.chat("web:h", "Where were we?").await;
    assert_ne!(
        body["session_id"].as_str(),
        Some(old.as_str()),
        "a new session"
    );
    let first = llm.requests()[3].clone();
    let new = app.store.session_current(&lane).await.unwrap().unwrap();
    assert_eq!(
        first.system(),
        new.system_prompt,
        "the system prompt carries no capsule"
    );
    assert_eq!(capsule(&client, "web:h").await["pending"], false);

    client.chat("web:h", "And then?").await;
    assert_capsule_received_once(
        &first,
        "Where were we?",
        "Write the report line naming the skipped host",
        &llm.requests()[4],
        "And then?",
    );
    // The transcript shows what the person typed, not the injected note.
    assert_eq!(
        client.transcript("web:h").await[0],
        ("user".into(), "Where were we?".into())
    );
    assert_eq!(llm.request_count(), 5);
    app.shutdown().await;
}

#[tokio::test]
async fn a_sentence_about_a_handoff_is_an_ordinary_turn_and_short_sessions_are_refused() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let (_, body) = client.chat("web:s", "handoff now please").await;
    assert_eq!(body["reply"], "reply to: handoff now please");
    assert_eq!(client.get("/api/v1/lanes/web:s/capsule").await.0, 404);

    // Two messages so far: nothing worth a capsule, and the person is told so at once.
    let (_, body) = client.chat("web:s", "/wrapup").await;
    let reply = body["reply"].as_str().unwrap();
    assert!(
        reply.contains("has 2 message(s), a handoff needs at least 4"),
        "{reply}"
    );
    let c = capsule(&client, "web:s").await;
    assert_eq!(
        (c["status"].as_str(), c["pending"].as_bool()),
        (Some("too_short"), Some(false))
    );
    assert_eq!(llm.request_count(), 1, "no writer call");
    app.shutdown().await;
}

#[tokio::test]
async fn a_writer_that_answers_garbage_gives_a_degraded_capsule_visible_outside_the_text() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    converse(&client, "web:g").await;
    llm.set_sticky(Some(Step::Garbage("<html>bad gateway</html>".into())));
    let (_, body) = client.chat("web:g", "handoff").await;
    assert_eq!(body["reply"], ACK);

    let c = capsule(&client, "web:g").await;
    assert_eq!(c["status"], "degraded", "{c}");
    assert_eq!(c["pending"], true);
    let text = c["text"].as_str().unwrap();
    assert!(text.starts_with("## Working on\nThe writer model did not return a usable handoff"));
    assert!(text.contains("skip unreachable hosts") && text.contains("## Recovery"));
    let (_, metrics) = client.get("/metrics").await;
    assert!(
        metrics.contains("herald_capsule_builds_total{status=\"degraded\"}"),
        "{metrics}"
    );
    // The chat is told too, not only the file.
    wait_until(
        "a degraded note queued for the chat",
        Duration::from_secs(5),
        || async {
            app.store
                .outbox_recent(50)
                .await
                .unwrap()
                .iter()
                .any(|r| r.lane == "web:g" && r.text.contains("status: degraded"))
        },
    )
    .await;
    app.shutdown().await;
}

#[tokio::test]
async fn a_marker_older_than_36_hours_is_deleted_unread_and_inject_false_keeps_markers() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let put = |lane: &str, age_h: i64| NewCapsule {
        lane: lane.into(),
        session_id: "a-session-long-gone".into(),
        status: herald::domain::BuildStatus::Ok,
        text: CAPSULE.into(),
        message_count: 8,
        confidential: false,
        created_at: now_ms() - age_h * 3_600_000,
        agent: "default".into(),
    };
    app.store
        .capsule_put(&put("web:stale", 37), true)
        .await
        .unwrap();
    client.chat("web:stale", "good morning").await;
    assert_eq!(llm.requests()[0].last_user(), "good morning");
    assert_eq!(capsule(&client, "web:stale").await["pending"], false);
    app.shutdown().await;

    let mut config = test_config(&llm, &data);
    config.handoff.inject = false;
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);
    app.store
        .capsule_put(&put("web:quiet", 1), true)
        .await
        .unwrap();
    client.chat("web:quiet", "hi").await;
    assert_eq!(llm.requests()[1].last_user(), "hi");
    assert_eq!(capsule(&client, "web:quiet").await["pending"], true);
    app.shutdown().await;
}

#[tokio::test]
async fn an_unauthorized_handoff_builds_nothing_and_calls_no_model() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.telegram.allowed_users = vec!["42".into()];
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);
    let stranger = MessageEvent::text(Platform::named("telegram"), "777", "777", "handoff");
    let id = app.ingest.ingest(&stranger).await.unwrap().id();
    let row = settled(&*app.store, id).await;
    assert_eq!(row.status, InboxStatus::Skipped);
    assert_eq!(row.note.as_deref(), Some("auth: unauthorized"));
    assert_eq!(llm.request_count(), 0);
    // At most the pairing offer of a private chat; never the handoff acknowledgement.
    let replies = app.store.outbox_for_inbox(id).await.unwrap();
    assert!(
        replies.iter().all(|r| r.text.contains("pairing code")),
        "{replies:?}"
    );
    assert_eq!(
        client.get("/api/v1/lanes/telegram:777/capsule").await.0,
        404
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_second_trigger_while_building_is_told_one_is_already_being_written() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    converse(&client, "web:twice").await;
    llm.push(Step::Delay(
        Duration::from_secs(2),
        Box::new(Step::Reply(CAPSULE.into())),
    ));
    let (_, first) = client.chat("web:twice", "handoff").await;
    assert_eq!(first["reply"], ACK);
    let (_, second) = client.chat("web:twice", "/wrapup").await;
    assert_eq!(second["reply"], ALREADY);
    let c = capsule(&client, "web:twice").await;
    assert_eq!(c["status"], "ok");
    assert_eq!(llm.request_count(), 3, "two turns and one writer call");
    app.shutdown().await;
}

#[tokio::test]
async fn a_confidential_lane_gets_a_scrubbed_breadcrumb_and_never_the_transcript() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.handoff.confidential_lanes = vec!["web:secret".into(), "web:secret2".into()];
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);

    converse(&client, "web:secret").await;
    llm.push(Step::Reply(
        CAPSULE.replace("mirror.sh", "mirror.sh, owner jane.doe@example.com"),
    ));
    client.chat("web:secret", "handoff").await;
    let c = capsule(&client, "web:secret").await;
    assert_eq!(
        (c["status"].as_str(), c["confidential"].as_bool()),
        (Some("ok"), Some(true))
    );
    let text = c["text"].as_str().unwrap();
    assert!(
        text.contains("owner [email]") && !text.contains("jane.doe"),
        "{text}"
    );
    assert!(
        !text.contains("## Recovery"),
        "no pointer into a confidential transcript"
    );
    assert!(llm.requests()[2]
        .system()
        .contains("This conversation is confidential"));

    converse(&client, "web:secret2").await;
    let open = app
        .store
        .session_current(&LaneKey::new("web:secret2"))
        .await
        .unwrap()
        .unwrap();
    llm.set_sticky(Some(Step::Garbage("not a completion".into())));
    client.chat("web:secret2", "handoff").await;
    let c = capsule(&client, "web:secret2").await;
    assert_eq!(c["status"], "write_failed");
    assert_eq!(
        (c["text"].as_str(), c["pending"].as_bool()),
        (Some(""), Some(false))
    );
    // Nothing was handed off, so the session stays open.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = app.store.session_get(&open.id).await.unwrap().unwrap();
    assert_eq!(still.ended_at, None);
    app.shutdown().await;
}
