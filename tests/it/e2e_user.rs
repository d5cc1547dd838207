//! What a user can hit (issue 15), end to end on the real core against the fake model, the fake
//! Telegram Bot API and the fake Discord, on SQLite and on Postgres: a brief mirrored into a
//! lane before the person writes, a handoff after a compaction, media the agent cannot read,
//! and a turn that panics.

mod also;
mod lanes;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use herald::app::App;
use herald::cron::JobSpec;
use herald::domain::LaneKey;
use herald::store::FireStatus;
use herald_test_support::db::Db;
use herald_test_support::fake_llm::{Billing, FakeLlm, Step};
use herald_test_support::handoff::{in_user_messages, LABEL};
use herald_test_support::harness::{init, test_config, wait_until, Client, WebApp};
use herald_test_support::on_each_backend;
use serde_json::Value;

const CAPSULE: &str = "## Working on\nMoving the backups to the new disk.\n\n\
## State\nThe copy of the photos finished; the music is next.\n\n\
## Decisions\nKeep the old disk read-only for a week.\n\n\
## Pointers\nThe copy script is sync.sh.\n\n\
## Next\nVerify the checksums of the music folder.\n";

/// Polls the capsule API until the lane has a build outcome.
async fn capsule(client: &Client, lane: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = client.get(&format!("/api/v1/lanes/{lane}/capsule")).await;
        if status == 200 {
            return serde_json::from_str(&body).unwrap();
        }
        assert!(Instant::now() < deadline, "no capsule for {lane}: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn handoff(app: &App, client: &Client, lane: &str) -> (String, Value) {
    let old = app
        .store
        .session_current(&LaneKey::new(lane))
        .await
        .unwrap()
        .unwrap()
        .id;
    let (_, body) = client.chat(lane, "handoff").await;
    assert_eq!(body["reply"], herald::handoff::ACK, "{body}");
    let c = capsule(client, lane).await;
    assert_eq!(c["status"], "ok", "{c}");
    wait_until("the session to rotate", Duration::from_secs(10), || async {
        app.store
            .session_get(&old)
            .await
            .unwrap()
            .unwrap()
            .ended_at
            .is_some()
    })
    .await;
    (old.into_string(), c)
}

// ---- 1. A brief mirrored into a lane does not eat its pending capsule ----

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 6, 0, 0).unwrap()
}

async fn a_brief_before_the_person_writes_keeps_the_capsule(db: Db) {
    let WebApp {
        llm,
        data: _data,
        app,
        client,
    } = WebApp::start(db).await;
    let lane = "web:brief";
    for text in [
        "I am moving the backups to the new disk.",
        "The photos are done; the music is next.",
    ] {
        assert_eq!(client.chat(lane, text).await.0, 200);
    }
    llm.push(Step::Reply(CAPSULE.into()));
    handoff(&app, &client, lane).await;

    // Next morning a scheduled brief is delivered into the chat and mirrored into its lane,
    // which opens the new session with a synthetic user row.
    let now = Arc::new(Mutex::new(t0()));
    let clock = now.clone();
    let sched = app
        .scheduler("test/cron")
        .with_clock(Arc::new(move || *clock.lock().unwrap()));
    let spec = JobSpec {
        name: "morning".into(),
        schedule: "every 1h".into(),
        prompt: "Write the morning brief.".into(),
        deliver: vec![lane.into()],
        timezone: None,
        catch_up: None,
        enabled: true,
        budget: None,
    };
    app.store
        .cron_job_add(&spec, t0().timestamp_millis())
        .await
        .unwrap();
    *now.lock().unwrap() = t0() + TimeDelta::hours(1) + TimeDelta::seconds(5);
    wait_until("the brief to run", Duration::from_secs(15), || async {
        sched.tick().await.unwrap();
        let fires = app.store.cron_fires(Some("morning"), 10).await.unwrap();
        fires.len() == 1 && fires[0].status == FireStatus::Ok
    })
    .await;
    wait_until(
        "the brief mirrored into the lane",
        Duration::from_secs(10),
        || async {
            match app
                .store
                .session_current(&LaneKey::new(lane))
                .await
                .unwrap()
            {
                Some(s) => app.store.messages(&s.id, true).await.unwrap().len() == 2,
                None => false,
            }
        },
    )
    .await;
    let c = capsule(&client, lane).await;
    assert_eq!(c["pending"], true, "the mirror must not take the capsule");

    // The person writes: this is the new session's first real turn, and it gets the capsule.
    let (_, body) = client.chat(lane, "Good morning, where were we?").await;
    assert_eq!(body["status"], "done", "{body}");
    let first = llm.requests().last().unwrap().clone();
    let user = first.last_user();
    assert!(
        user.starts_with("Good morning, where were we?\n\n"),
        "{user}"
    );
    assert_eq!(in_user_messages(&first, LABEL), 1, "{user}");
    assert!(
        user.contains("Verify the checksums of the music folder"),
        "{user}"
    );
    assert_eq!(capsule(&client, lane).await["pending"], false);
    // The model saw the brief too, before the person's message.
    assert!(first.messages().iter().any(|m| m["role"] == "assistant"
        && m["content"]
            .as_str()
            .unwrap_or("")
            .contains("Delivered scheduled brief")));
    app.shutdown().await;
}

on_each_backend!(
    brief_before_first_message_keeps_capsule_sqlite,
    brief_before_first_message_keeps_capsule_postgres,
    a_brief_before_the_person_writes_keeps_the_capsule
);

// ---- 2. A handoff after an in-place compaction reads the whole dialogue ----

/// A turn of about 700 characters with a unique marker `<wN>`.
fn turn_text(i: usize) -> String {
    let mut s = format!("Turn {i} <w{i}>: the disk copy of folder {i} is running. ");
    while s.len() < 700 {
        s.push_str("The rsync log repeats the same line about preserved permissions. ");
    }
    s
}

async fn a_handoff_after_compaction_gets_the_middle(db: Db) {
    init();
    let llm = FakeLlm::start().await;
    llm.set_billing(Billing::BySize);
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.llm.context_window = Some(6_000);
    db.apply(&mut config);
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);
    let lane = "web:long";
    for i in 1..=30 {
        let (status, body) = client.chat(lane, &turn_text(i)).await;
        assert_eq!(status, 200, "{body}");
    }
    let sid = app
        .store
        .session_current(&LaneKey::new(lane))
        .await
        .unwrap()
        .unwrap()
        .id;
    let rows = app.store.messages(&sid, false).await.unwrap();
    assert!(
        rows.iter()
            .any(|m| m.compacted && m.content.contains("<w5>")),
        "the setup must compact the middle in place"
    );

    let requests_before = llm.request_count();
    llm.push(Step::Reply(CAPSULE.into()));
    let (old, c) = handoff(&app, &client, lane).await;
    assert_eq!(old, sid);
    let writer = llm.requests()[requests_before].clone();
    assert!(writer.system().starts_with("You write a handoff capsule"));
    let input = writer.last_user();
    // Every turn once as the person wrote it, and once in the echoed reply: no turn missing
    // from the middle, none doubled by the tail copies.
    for i in 1..=30 {
        assert_eq!(
            input.matches(&format!("<w{i}>")).count(),
            2,
            "turn {i} in the writer's input"
        );
    }
    assert!(
        !input.contains("[compaction]"),
        "the carrier's label is not dialogue"
    );
    let text = c["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("session {sid} (60 messages)")),
        "the Recovery section counts the whole session: {text}"
    );
    assert_eq!(c["message_count"], 60, "{c}");
    app.shutdown().await;
}

on_each_backend!(
    handoff_after_compaction_reads_the_middle_sqlite,
    handoff_after_compaction_reads_the_middle_postgres,
    a_handoff_after_compaction_gets_the_middle
);
