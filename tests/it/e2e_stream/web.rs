//! Streaming in the web chat: `POST /api/v1/chat` with `"stream": true` answers server-sent
//! events (deltas as the model writes, then `done` with the same fields as the JSON answer),
//! and the chat page in a real headless Chromium shows the answer growing.

use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use herald::app::App;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config};
use herald_test_support::webdriver::{find, Driver};
use serde_json::{json, Value};

use super::{long_answer, streaming_on};

async fn start() -> (FakeLlm, App, tempfile::TempDir) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    streaming_on(&mut c);
    let app = App::start(c).await.expect("app starts");
    (llm, app, data)
}

/// Posts a chat message asking for events; returns (event, data, when) in order.
async fn sse_chat(app: &App, body: Value, accept_header: bool) -> Vec<(String, String, Instant)> {
    let mut req = reqwest::Client::new()
        .post(format!("http://{}/api/v1/chat", app.addr))
        .json(&body);
    if accept_header {
        req = req.header("accept", "text/event-stream");
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ctype.starts_with("text/event-stream"), "{ctype}");
    let mut events = resp.bytes_stream().eventsource();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, events.next()).await {
        let ev = ev.expect("a well-formed event");
        out.push((ev.event, ev.data, Instant::now()));
    }
    out
}

#[tokio::test]
async fn web_chat_streams_deltas_then_done_with_the_usual_fields() {
    let (llm, app, _data) = start().await;
    let answer = long_answer(60);
    llm.push(Step::stream(&answer, 12, Duration::from_millis(50)));
    let events = sse_chat(
        &app,
        json!({"lane": "web:sse", "text": "stream it", "stream": true}),
        false,
    )
    .await;
    let deltas: Vec<&(String, String, Instant)> =
        events.iter().filter(|e| e.0 == "delta").collect();
    assert!(
        deltas.len() >= 10,
        "the answer came in pieces: {}",
        deltas.len()
    );
    let joined: String = deltas
        .iter()
        .map(|e| {
            serde_json::from_str::<Value>(&e.1).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(joined, answer);
    let (kind, data, done_at) = events.last().expect("events");
    assert_eq!(kind, "done", "done comes last");
    assert!(
        *done_at - deltas[0].2 > Duration::from_millis(1000),
        "the first words came long before the end"
    );
    let done: Value = serde_json::from_str(data).unwrap();
    assert_eq!(done["reply"], answer.as_str());
    assert_eq!(done["status"], "done");
    for field in ["session_id", "message_id", "inbox_id"] {
        assert!(!done[field].is_null(), "{field} in {done}");
    }
    app.shutdown().await;
}

#[tokio::test]
async fn web_chat_accept_header_asks_for_events_too() {
    let (llm, app, _data) = start().await;
    llm.push(Step::stream(
        "short and sweet",
        4,
        Duration::from_millis(20),
    ));
    let events = sse_chat(&app, json!({"lane": "web:acc", "text": "hi"}), true).await;
    let (kind, data, _) = events.last().unwrap();
    assert_eq!(kind, "done");
    let done: Value = serde_json::from_str(data).unwrap();
    assert_eq!(done["reply"], "short and sweet");
    app.shutdown().await;
}

#[tokio::test]
async fn web_chat_page_in_headless_chromium_shows_the_answer_growing() {
    let (Some(chromium), Some(chromedriver)) = (
        find(&["chromium", "chromium-browser", "google-chrome"]),
        find(&["chromedriver"]),
    ) else {
        herald_test_support::skip_or_fail(
            "chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
        );
        return;
    };
    let (llm, app, _data) = start().await;
    let answer = long_answer(80);
    llm.push(Step::stream(&answer, 10, Duration::from_millis(60)));
    let driver = Driver::start(&chromedriver, &chromium).await;
    driver
        .cmd("url", json!({"url": format!("http://{}/", app.addr)}))
        .await;
    let lane = driver.find("#lane").await;
    driver
        .cmd(&format!("element/{lane}/clear"), json!({}))
        .await;
    driver
        .cmd(
            &format!("element/{lane}/value"),
            json!({"text": "web:browser"}),
        )
        .await;
    let text = driver.find("#text").await;
    driver
        .cmd(
            &format!("element/{text}/value"),
            json!({"text": "write slowly"}),
        )
        .await;
    driver.click("#send").await;
    let bubble = ".msg.assistant:last-child";
    // Part of the answer shows while the model is still writing…
    let partial = driver
        .wait_text(bubble, |t| t.starts_with("word0") && t.len() < answer.len())
        .await;
    assert!(answer.starts_with(partial.trim_end()), "{partial:?}");
    // …and the bubble ends with exactly the answer.
    driver.wait_text(bubble, |t| t == answer).await;
    driver.stop().await;
    app.shutdown().await;
}

#[tokio::test]
async fn web_chat_events_without_streaming_carry_only_done() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let events = sse_chat(
        &app,
        json!({"lane": "web:off", "text": "hi", "stream": true}),
        false,
    )
    .await;
    let kinds: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(kinds, ["done"]);
    let done: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(done["reply"], "reply to: hi");
    app.shutdown().await;
}
