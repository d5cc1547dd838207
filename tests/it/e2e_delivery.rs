//! Scheduled-run delivery through the core: a run's reply goes to every target as outbox
//! rows and is mirrored into each target lane's transcript under that lane's lease.

use std::time::{Duration, Instant};

use herald::app::App;
use herald::config::Config;
use herald::cron::parse_target;
use herald::domain::{LaneKey, MessageEvent, Origin, Platform};
use herald::store::InboxStatus;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, wait_for, Client};

fn fire(job: &str, key: &str, prompt: &str, targets: &[&str]) -> MessageEvent {
    let mut ev = MessageEvent::text(Platform::CRON, job, "cron", prompt);
    ev.platform_message_id = key.to_string();
    ev.origin = Origin::Scheduled {
        deliver_to: targets
            .iter()
            .map(|t| parse_target(t, &Config::default().deliverable()).unwrap())
            .collect(),
    };
    ev
}

async fn wait_done(app: &App, inbox_id: i64) -> InboxStatus {
    wait_for(
        &format!("inbox {inbox_id} to finish"),
        Duration::from_secs(15),
        async || {
            let row = app.store.inbox_get(inbox_id).await.unwrap().unwrap();
            (row.status != InboxStatus::Pending).then_some(row.status)
        },
    )
    .await
}

async fn wait_transcript(client: &Client, lane: &str, n: usize) -> Vec<(String, String)> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let t = client.transcript(lane).await;
        if t.len() >= n {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "transcript of {lane} stayed at {t:?}"
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

#[tokio::test]
async fn a_brief_reaches_every_target_and_is_mirrored_into_its_transcript() {
    init();
    let llm = FakeLlm::start().await;
    llm.push(Step::Reply("Good morning: 3 meetings today.".into()));
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);

    let id = app
        .ingest
        .ingest(&fire(
            "morning",
            "fire:morning:1",
            "Write the brief.",
            &["web:alice", "web:bob"],
        ))
        .await
        .unwrap()
        .id();
    assert_eq!(wait_done(&app, id).await, InboxStatus::Done);
    let rows = app.store.outbox_for_inbox(id).await.unwrap();
    let mut lanes: Vec<&str> = rows.iter().map(|r| r.lane.as_str()).collect();
    lanes.sort();
    assert_eq!(lanes, ["web:alice", "web:bob"]);
    assert!(rows
        .iter()
        .all(|r| r.text == "Good morning: 3 meetings today."));

    for lane in ["web:alice", "web:bob"] {
        let t = wait_transcript(&client, lane, 2).await;
        assert_eq!(
            t[0],
            ("user".into(), "[scheduled delivery: morning]".into())
        );
        assert_eq!(
            t[1],
            (
                "assistant".into(),
                "[Delivered scheduled brief \"morning\"]\nGood morning: 3 meetings today.".into()
            )
        );
    }
    // The person answers; the agent sees what it sent.
    let (_, body) = client.chat("web:alice", "move the second meeting").await;
    assert_eq!(body["reply"], "reply to: move the second meeting");
    let last = llm.requests().last().unwrap().clone();
    assert!(last.messages().iter().any(|m| m["content"]
        .as_str()
        .is_some_and(|c| c.contains("3 meetings today"))));
    // Each fire is its own session: the cron lane has no open session left.
    assert!(app
        .store
        .session_current(&LaneKey::new("cron:morning"))
        .await
        .unwrap()
        .is_none());
    app.shutdown().await;
}

#[tokio::test]
async fn a_silent_reply_delivers_nothing() {
    init();
    let llm = FakeLlm::start().await;
    llm.push(Step::Reply("  [SILENT]\n".into()));
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let id = app
        .ingest
        .ingest(&fire(
            "check",
            "fire:check:1",
            "Anything new?",
            &["web:alice"],
        ))
        .await
        .unwrap()
        .id();
    assert_eq!(wait_done(&app, id).await, InboxStatus::Done);
    assert!(app.store.outbox_for_inbox(id).await.unwrap().is_empty());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(client.transcript("web:alice").await.is_empty());
    assert_eq!(
        app.store
            .inbox_get(id)
            .await
            .unwrap()
            .unwrap()
            .note
            .as_deref(),
        Some("silent")
    );
    app.shutdown().await;
}

#[tokio::test]
async fn the_mirror_waits_for_an_in_flight_turn_and_lands_after_it() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    // A slow turn in alice's lane…
    llm.push(Step::Delay(
        Duration::from_millis(800),
        Box::new(Step::Reply("slow answer".into())),
    ));
    let chat = client.chat("web:alice", "think hard");
    let brief = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        llm.push(Step::Reply("the brief".into()));
        let id = app
            .ingest
            .ingest(&fire("noon", "fire:noon:1", "brief", &["web:alice"]))
            .await
            .unwrap()
            .id();
        wait_done(&app, id).await
    };
    let ((_, reply), status) = tokio::join!(chat, brief);
    assert_eq!(reply["reply"], "slow answer");
    assert_eq!(status, InboxStatus::Done);
    let t = wait_transcript(&client, "web:alice", 3).await;
    assert_eq!(
        t,
        vec![
            ("user".into(), "think hard".into()),
            ("assistant".into(), "slow answer".into()),
            ("user".into(), "[scheduled delivery: noon]".into()),
            (
                "assistant".into(),
                "[Delivered scheduled brief \"noon\"]\nthe brief".into()
            ),
        ]
    );
    app.shutdown().await;
}
