//! End to end through the web adapter: the real core on 127.0.0.1:0, a fake model, SQLite.

use std::time::Duration;

use herald::app::App;
use herald::domain::SessionId;
use herald::domain::{MessageEvent, Platform};
use herald::store::InboxStatus;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, settled, test_config, wait_until, Client};
use serde_json::json;

#[tokio::test]
async fn web_message_reaches_the_model_and_the_reply_comes_back() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);

    let (status, body) = client
        .chat("web:alice", "What is the capital of France?")
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "reply to: What is the capital of France?");
    assert!(body["session_id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(body["message_id"].as_i64().is_some());

    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    let stored = app
        .store
        .session_get(&SessionId::from(body["session_id"].as_str().unwrap()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        reqs[0].system(),
        stored.system_prompt,
        "the model got the stored system prompt"
    );
    assert_eq!(reqs[0].last_user(), "What is the capital of France?");
    assert_eq!(reqs[0].body["model"], "fake-model");

    // A second turn sends the very same system prompt bytes and the first exchange.
    let (_, body2) = client.chat("web:alice", "And of Italy?").await;
    assert_eq!(body2["reply"], "reply to: And of Italy?");
    let reqs = llm.requests();
    assert_eq!(reqs[1].system().as_bytes(), reqs[0].system().as_bytes());
    let roles: Vec<&str> = reqs[1]
        .messages()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(
        client.transcript("web:alice").await,
        vec![
            ("user".into(), "What is the capital of France?".into()),
            (
                "assistant".into(),
                "reply to: What is the capital of France?".into()
            ),
            ("user".into(), "And of Italy?".into()),
            ("assistant".into(), "reply to: And of Italy?".into()),
        ]
    );
    app.shutdown().await;
}

#[tokio::test]
async fn messages_sent_mid_turn_are_answered_in_order_and_lanes_run_in_parallel() {
    init();
    let llm = FakeLlm::start().await;
    llm.set_default_delay(Duration::from_millis(600));
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    // Waiting for the next turn (`queue`); joining the running one is `e2e_steer`.
    config.lanes.mid_turn = herald::config::MidTurn::Queue;
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);

    let a1 = client.chat("web:a", "first");
    let a2 = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        client.chat("web:a", "second").await
    };
    let b1 = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        client.chat("web:b", "other lane").await
    };
    let ((_, r1), (_, r2), (_, rb)) = tokio::join!(a1, a2, b1);
    assert_eq!(r1["reply"], "reply to: first");
    assert_eq!(r2["reply"], "reply to: second");
    assert_eq!(rb["reply"], "reply to: other lane");

    let reqs = llm.requests();
    assert_eq!(reqs.len(), 3);
    let find = |text: &str| reqs.iter().find(|r| r.last_user() == text).unwrap().clone();
    let (first, second, other) = (find("first"), find("second"), find("other lane"));
    // One turn at a time in lane a: the second call starts after the first answered, and
    // carries the first exchange.
    assert!(second.started >= first.finished.unwrap());
    assert_eq!(second.messages().len(), 4);
    // Lane b did not wait for lane a.
    assert!(
        other.started < first.finished.unwrap(),
        "lanes must run in parallel"
    );
    assert_eq!(
        client.transcript("web:a").await,
        vec![
            ("user".into(), "first".into()),
            ("assistant".into(), "reply to: first".into()),
            ("user".into(), "second".into()),
            ("assistant".into(), "reply to: second".into()),
        ]
    );
    // Two turns recorded in lane a, never overlapping.
    let turns = app
        .store
        .turns(&herald::domain::LaneKey::new("web:a"), 10)
        .await
        .unwrap();
    assert_eq!(turns.len(), 2);
    assert!(turns[1].started_at >= turns[0].ended_at.unwrap());
    app.shutdown().await;
}

#[tokio::test]
async fn unauthorized_sender_costs_no_model_call_and_leaves_no_transcript() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.telegram.allowed_users = vec!["42".into()];
    let app = App::start(config).await.unwrap();

    let stranger = MessageEvent::text(Platform::named("telegram"), "777", "777", "let me in");
    let inbox_id = app.ingest.ingest(&stranger).await.unwrap().id();
    let friend = MessageEvent::text(Platform::named("telegram"), "42", "42", "hello");
    let friend_id = app.ingest.ingest(&friend).await.unwrap().id();

    let a = settled(&*app.store, inbox_id).await;
    assert_eq!(a.status, InboxStatus::Skipped);
    assert_eq!(a.note.as_deref(), Some("auth: unauthorized"));
    assert_eq!(
        settled(&*app.store, friend_id).await.status,
        InboxStatus::Done
    );
    // Only the allowed sender reached the model; the stranger's lane has no session at all.
    assert_eq!(llm.request_count(), 1);
    assert_eq!(llm.requests()[0].last_user(), "hello");
    assert!(app
        .store
        .session_current(&stranger.lane())
        .await
        .unwrap()
        .is_none());
    // The only thing the stranger gets is a pairing code (private chat), not an answer.
    let replies = app.store.outbox_for_inbox(inbox_id).await.unwrap();
    assert_eq!(replies.len(), 1);
    assert!(
        replies[0].text.contains("pairing code"),
        "{}",
        replies[0].text
    );
    app.shutdown().await;
}

#[tokio::test]
async fn rate_limit_with_retry_after_then_success_gives_one_reply() {
    init();
    let llm = FakeLlm::start().await;
    llm.push(Step::Status(
        429,
        vec![("Retry-After".into(), "1".into())],
        r#"{"error":{"message":"slow down"}}"#.into(),
    ));
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);

    let (status, body) = client.chat("web:rl", "hi").await;
    assert_eq!(status, 200);
    assert_eq!(body["reply"], "reply to: hi");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2, "one 429, one success");
    let waited = reqs[1].started - reqs[0].finished.unwrap();
    assert!(
        waited >= Duration::from_millis(950),
        "Retry-After honoured, waited {waited:?}"
    );
    assert_eq!(
        client.transcript("web:rl").await,
        vec![
            ("user".into(), "hi".into()),
            ("assistant".into(), "reply to: hi".into())
        ]
    );
    let outbox = app
        .store
        .outbox_for_inbox(body["inbox_id"].as_i64().unwrap())
        .await
        .unwrap();
    assert_eq!(outbox.len(), 1);
    app.shutdown().await;
}

#[tokio::test]
async fn a_model_that_always_times_out_gets_one_clear_error_and_keeps_the_message() {
    init();
    let llm = FakeLlm::start().await;
    llm.set_sticky(Some(Step::Hang));
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.llm.timeout_secs = 1;
    config.llm.max_retries = 1;
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);

    let (status, body) = client.chat("web:slow", "are you there?").await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "failed");
    let reply = body["reply"].as_str().unwrap();
    assert!(reply.contains("did not answer in time"), "{reply}");
    assert!(reply.contains("your message was kept"), "{reply}");
    assert_eq!(llm.request_count(), 2, "one try and one retry");
    // The message is in the transcript, the error line is not (it is not the agent speaking).
    assert_eq!(
        client.transcript("web:slow").await,
        vec![("user".into(), "are you there?".into())]
    );
    // Exactly one error reply was queued.
    let outbox = app
        .store
        .outbox_for_inbox(body["inbox_id"].as_i64().unwrap())
        .await
        .unwrap();
    assert_eq!(outbox.len(), 1);

    // The next message sees the kept one in its context.
    llm.set_sticky(None);
    let (_, body) = client.chat("web:slow", "hello again").await;
    assert_eq!(body["reply"], "reply to: hello again");
    let last = llm.requests().last().unwrap().clone();
    let users: Vec<&str> = last
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["are you there?", "hello again"]);
    app.shutdown().await;
}

#[tokio::test]
async fn garbage_from_the_model_is_an_error_line_not_a_crash() {
    init();
    let llm = FakeLlm::start().await;
    llm.set_sticky(Some(Step::Garbage("<html>bad gateway</html>".into())));
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.llm.max_retries = 0;
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);
    let (status, body) = client.chat("web:g", "hi").await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "failed");
    assert!(body["reply"].as_str().unwrap().contains("unavailable"));
    app.shutdown().await;
}

#[tokio::test]
async fn same_client_id_twice_is_one_turn_and_one_reply() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let body = json!({"lane": "web:dup", "text": "once", "client_id": "c-1"});
    let (_, a) = client.chat_body(body.clone()).await;
    let (_, b) = client.chat_body(body).await;
    assert_eq!(a["reply"], "reply to: once");
    assert_eq!(b["reply"], a["reply"]);
    assert_eq!(a["inbox_id"], b["inbox_id"]);
    assert_eq!(llm.request_count(), 1);
    app.shutdown().await;
}

#[tokio::test]
async fn bad_requests_get_clear_json_errors() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.web.max_message_chars = 100;
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);
    let (s, b) = client.chat("web:x", &"é".repeat(101)).await;
    assert_eq!(s, 413);
    assert!(b["error"].as_str().unwrap().contains("limit is 100"), "{b}");
    let (s, b) = client.chat("web:x", "   ").await;
    assert_eq!(s, 400);
    assert!(b["error"].as_str().unwrap().contains("empty"));
    let (s, b) = client.chat_body(json!({"text": "no lane"})).await;
    assert_eq!(s, 400);
    assert!(b["error"].as_str().unwrap().contains("JSON like"), "{b}");
    assert_eq!(llm.request_count(), 0);
    app.shutdown().await;
}

#[tokio::test]
async fn health_readiness_and_the_page() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    assert_eq!(client.get("/healthz").await, (200, "ok".into()));
    assert_eq!(client.get("/readyz").await, (200, "ready".into()));
    let (s, page) = client.get("/").await;
    assert_eq!(s, 200);
    assert!(page.contains("<title>Herald"));
    client.chat("web:m", "count me").await;
    let (s, metrics) = client.get("/metrics").await;
    assert_eq!(s, 200);
    assert!(metrics.contains("herald_turns_total"), "{metrics}");
    app.shutdown().await;
}

#[tokio::test]
async fn a_tool_call_round_trip_lands_in_the_transcript() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    client.chat("web:t", "remember the word pineapple").await;
    llm.push(Step::ToolCall(
        "session_search".into(),
        r#"{"query":"pineapple"}"#.into(),
    ));
    llm.push(Step::Reply("Found it.".into()));
    let (_, body) = client.chat("web:t", "what word did I say?").await;
    assert_eq!(body["reply"], "Found it.");
    let reqs = llm.requests();
    let tool_msg = reqs[2].messages().last().unwrap().clone();
    assert_eq!(tool_msg["role"], "tool");
    assert_eq!(tool_msg["tool_call_id"], "call_1");
    assert!(
        tool_msg["content"].as_str().unwrap().contains("pineapple"),
        "{tool_msg}"
    );
    // Tools are sent in name order; `session_search` is among them (the `cron` builtin sorts first).
    assert!(reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["function"]["name"] == "session_search"));
    app.shutdown().await;
}

#[tokio::test]
async fn graceful_shutdown_finishes_the_running_turn_and_releases_the_lease() {
    init();
    let llm = FakeLlm::start().await;
    llm.push(Step::Delay(
        Duration::from_millis(700),
        Box::new(Step::Reply("finished in time".into())),
    ));
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    let client = Client::new(&app);
    let store = app.store.clone();
    let chat = tokio::spawn(async move { client.chat("web:bye", "one more thing").await });
    wait_until("the turn to start", Duration::from_secs(10), || async {
        llm.request_count() > 0
    })
    .await;
    // The lane's lease is held while the turn runs.
    let lane = herald::domain::LaneKey::new("web:bye");
    let held = store.lease_get(lane.as_str()).await.unwrap().unwrap();
    assert!(held.expires_at > herald::store::now_ms());
    app.shutdown().await;
    // The turn was allowed to finish and its reply was committed and delivered.
    let (status, body) = chat.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "finished in time");
    let released = store.lease_get(lane.as_str()).await;
    // The store is closed after shutdown; reopen to check the lease row.
    drop(released);
    let reopened = herald::store::connect(
        &format!("sqlite://{}", data.path().join("herald.db").display()),
        1,
    )
    .await
    .unwrap();
    let lease = reopened.lease_get(lane.as_str()).await.unwrap().unwrap();
    assert_eq!(lease.expires_at, 0, "lease released on shutdown");
    let rows = reopened.outbox_recent(5).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status, "sent");
}

#[tokio::test]
async fn a_lane_beyond_max_workers_is_served_while_the_others_sit_idle() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    // Two slots, idle workers that would keep them for ten minutes, and a reply deadline far
    // shorter than that: the third lane is answered only if an idle worker gives its slot up.
    config.lanes.max_workers = 2;
    config.lanes.idle_secs = 600;
    config.web.reply_timeout_secs = 20;
    let app = App::start(config).await.unwrap();
    let client = Client::new(&app);

    for lane in ["web:one", "web:two", "web:three", "web:one"] {
        let (status, body) = client.chat(lane, &format!("hello from {lane}")).await;
        assert_eq!(status, 200, "{lane}: {body}");
        assert_eq!(body["reply"], format!("reply to: hello from {lane}"));
    }
    assert!(app.router.active_workers() <= 2);
    app.shutdown().await;
}

/// A fresh install without a model answers every chat with how to configure one, and does not
/// claim that an API key is required (local endpoints need none).
#[tokio::test]
async fn without_a_model_the_reply_says_what_to_set() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.llm.provider = herald::config::ProviderKind::Auto;
    c.llm.base_url = None;
    c.llm.model = None;
    let app = App::start(c).await.unwrap();
    let (status, body) = Client::new(&app).chat("web:fresh", "hello?").await;
    assert_eq!(status, 200, "{body}");
    let reply = body["reply"].as_str().unwrap_or_default();
    assert!(
        reply.starts_with("No model is configured yet. Set OPENAI_BASE_URL and OPENAI_MODEL"),
        "{reply}"
    );
    assert!(
        reply.contains("plus OPENAI_API_KEY if the endpoint needs a key"),
        "{reply}"
    );
    // The setup line is the answer, not a failure, and it offers the demo provider.
    assert_eq!(body["status"], "done", "{body}");
    assert!(reply.contains("HERALD_LLM__PROVIDER=echo"), "{reply}");
    // Kept: a reload of the page shows it.
    let transcript = Client::new(&app).transcript("web:fresh").await;
    assert_eq!(
        transcript
            .last()
            .map(|(role, text)| (role.as_str(), text.as_str())),
        Some(("assistant", reply)),
        "{transcript:?}"
    );
    assert_eq!(llm.request_count(), 0);
    app.shutdown().await;
}
