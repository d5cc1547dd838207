//! `/status` and `/stop` while a turn runs: answered at once (before the turn's own reply),
//! naming what the turn is doing, and each answered exactly once.

use std::time::Duration;

use herald::app::App;
use herald_test_support::fake_llm::Step;
use herald_test_support::harness::wait_until;
use herald_test_support::mcp::stdio_server;
use herald_test_support::telegram::{fakes, start, tg_config, USER};

use super::WAIT;

#[tokio::test]
async fn status_during_a_slow_model_call_is_answered_first_and_names_the_model_call() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data).await;
    llm.push(Step::Delay(
        Duration::from_secs(8),
        Box::new(Step::Reply("the slow answer".into())),
    ));
    tg.push_private_text(USER, USER, "think slowly");
    wait_until("the model call to start", WAIT, || async {
        llm.request_count() >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let asked = std::time::Instant::now();
    tg.push_private_text(USER, USER, "/status");

    let sent = tg.wait_for_sent(1, WAIT).await;
    eprintln!(
        "/status during an 8 s model call answered after {:?}",
        asked.elapsed()
    );
    assert!(sent[0].text.starts_with("Session "), "{}", sent[0].text);
    assert!(
        sent[0]
            .text
            .contains("Working on a message now: model call"),
        "{}",
        sent[0].text
    );
    // The turn was not disturbed: its answer follows, and nothing came twice.
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "the slow answer");
    herald_test_support::harness::quiet(&*app.store).await;
    assert_eq!(tg.sent_messages().len(), 2, "{:?}", tg.sent_messages());
    assert_eq!(llm.request_count(), 1, "/status never reaches the model");
    app.shutdown().await;
}

#[tokio::test]
async fn status_during_a_slow_tool_names_the_tool() {
    let (tg, llm, data) = fakes().await;
    let starts = data.path().join("starts").display().to_string();
    let mut c = tg_config(&tg, &llm, &data);
    c.mcp.servers = vec![stdio_server("shop", "normal", &["--starts", &starts])];
    let app = App::start(c).await.expect("app starts");
    wait_until("the MCP server lists its tools", WAIT, || async {
        std::fs::read_to_string(&starts).is_ok_and(|s| s.lines().count() >= 1)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    llm.push(Step::ToolCall(
        "shop__slow".into(),
        r#"{"seconds":4}"#.into(),
    ));
    llm.push(Step::Reply("slept well".into()));
    tg.push_private_text(USER, USER, "take your time");
    wait_until("the tool call to be asked for", WAIT, || async {
        llm.request_count() >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    tg.push_private_text(USER, USER, "/status");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert!(
        sent[0].text.contains("running the tool shop__slow"),
        "{}",
        sent[0].text
    );
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "slept well");
    app.shutdown().await;
}

#[tokio::test]
async fn stop_answers_once() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data).await;
    llm.push(Step::Delay(
        Duration::from_secs(8),
        Box::new(Step::Reply("never sent".into())),
    ));
    tg.push_private_text(USER, USER, "think slowly");
    wait_until("the model call to start", WAIT, || async {
        llm.request_count() >= 1
    })
    .await;
    tg.push_private_text(USER, USER, "/stop");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].text, "Stopped.");
    // The stopped turn sends nothing of its own: one answer to /stop.
    herald_test_support::harness::quiet(&*app.store).await;
    let texts: Vec<String> = tg.sent_messages().into_iter().map(|m| m.text).collect();
    assert_eq!(texts, ["Stopped."]);

    // With nothing running, /stop says so, once.
    tg.push_private_text(USER, USER, "/stop");
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "Nothing is running in this conversation now.");
    herald_test_support::harness::quiet(&*app.store).await;
    assert_eq!(tg.sent_messages().len(), 2);
    app.shutdown().await;
}
