//! The smaller findings of issue 15: the degraded-capsule note goes through the lane (after a
//! turn in flight, under its lease), a chunk refused for good stops the rest of its reply with
//! one notice, and a model that answers nothing after tools gets one tools-stripped retry.

use std::sync::Arc;
use std::time::Duration;

use herald::app::App;
use herald::delivery::sender::UNDELIVERED;

use herald_test_support::db::Db;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::Fault;
use herald_test_support::harness::{init, test_config, wait_until, Client};

async fn the_degraded_note_waits_for_the_turn_in_flight(db: Db) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    db.apply(&mut config);
    let app = App::start(config).await.unwrap();
    let client = Arc::new(Client::new(&app));
    let lane = "web:note";
    for text in ["The disk copy is slow.", "It is the USB hub, I think."] {
        assert_eq!(client.chat(lane, text).await.0, 200);
    }
    // The writer answers garbage after a moment; meanwhile a slow turn runs in the lane.
    llm.push(Step::Delay(
        Duration::from_millis(400),
        Box::new(Step::Garbage("<html>bad gateway</html>".into())),
    ));
    llm.push(Step::Delay(
        Duration::from_millis(2_000),
        Box::new(Step::Reply("the slow answer".into())),
    ));
    let (_, body) = client.chat(lane, "handoff").await;
    assert_eq!(body["reply"], herald::handoff::ACK);
    wait_until("the writer's request", Duration::from_secs(10), || async {
        llm.request_count() >= 3
    })
    .await;
    let (status, body) = client.chat(lane, "and the hub?").await;
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("the slow answer"))
    );
    wait_until("the degraded note", Duration::from_secs(10), || async {
        app.store
            .outbox_recent(50)
            .await
            .unwrap()
            .iter()
            .any(|r| r.lane == lane && r.text.contains("status: degraded"))
    })
    .await;
    let mut rows: Vec<_> = app
        .store
        .outbox_recent(50)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.lane == lane)
        .collect();
    rows.sort_by_key(|r| r.id);
    let texts: Vec<&str> = rows.iter().map(|r| r.text.as_str()).collect();
    let reply = texts.iter().position(|t| *t == "the slow answer").unwrap();
    let note = texts
        .iter()
        .position(|t| t.contains("status: degraded"))
        .unwrap();
    assert!(
        note > reply,
        "the note is written by the lane's worker, after the turn it found running: {texts:?}"
    );
    app.shutdown().await;
}

herald_test_support::on_each_backend!(
    degraded_note_goes_through_the_lane_sqlite,
    degraded_note_goes_through_the_lane_postgres,
    the_degraded_note_waits_for_the_turn_in_flight
);

async fn a_refused_chunk_stops_the_rest_of_its_reply(db: Db) {
    use herald_test_support::telegram::{fakes, tg_config, USER};
    let (tg, llm, data) = fakes().await;
    let mut config = tg_config(&tg, &llm, &data);
    db.apply(&mut config);
    let app = App::start(config).await.unwrap();
    // Three chunks: the first goes out, Telegram refuses the second for good.
    let para = |c: char| format!("{}\n\n", c.to_string().repeat(3_000));
    llm.push(Step::Reply(format!(
        "{}{}{}",
        para('a'),
        para('b'),
        para('c')
    )));
    tg.fail_next("sendMessage", Fault::Delay(Duration::ZERO));
    tg.fail_next(
        "sendMessage",
        Fault::Refused("Bad Request: message must be non-empty".into()),
    );
    tg.push_private_text(USER, USER, "write me a long one");
    let sent = tg.wait_for_sent(2, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let sent_now = tg.sent_messages();
    assert_eq!(
        sent_now.len(),
        2,
        "{:?}",
        sent_now
            .iter()
            .map(|m| &m.text[..20.min(m.text.len())])
            .collect::<Vec<_>>()
    );
    assert!(sent[0].text.starts_with("aaa"));
    assert_eq!(sent[1].text, UNDELIVERED, "one notice instead of the rest");
    assert!(
        !sent_now.iter().any(|m| m.text.starts_with("ccc")),
        "no hole in the middle"
    );
    app.shutdown().await;
    tg.shutdown().await;
}

herald_test_support::on_each_backend!(
    refused_chunk_stops_its_reply_sqlite,
    refused_chunk_stops_its_reply_postgres,
    a_refused_chunk_stops_the_rest_of_its_reply
);

#[tokio::test]
async fn an_empty_answer_after_tools_gets_one_tools_stripped_retry() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let search = r#"{"query": "backup disk"}"#.to_string();
    llm.push(Step::ToolCall("session_search".into(), search.clone()));
    llm.push(Step::Reply(String::new()));
    llm.push(Step::Reply("The backups are on the new disk.".into()));
    let (_, body) = client.chat("web:empty", "where are the backups?").await;
    assert_eq!(body["reply"], "The backups are on the new disk.");
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[1].body["tools"]
        .as_array()
        .is_some_and(|t| !t.is_empty()));
    assert!(
        requests[2]
            .body
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(|t| t.is_empty())),
        "the retry is sent without tools: {}",
        requests[2].body
    );

    // Empty again on the retry: the turn settles for the empty-answer line, no third try.
    llm.push(Step::ToolCall("session_search".into(), search));
    llm.push(Step::Reply(String::new()));
    llm.push(Step::Reply("  ".into()));
    let (_, body) = client.chat("web:empty", "and now?").await;
    assert_eq!(body["reply"], "(The model returned an empty answer.)");
    assert_eq!(llm.request_count(), 6);
    app.shutdown().await;
}
