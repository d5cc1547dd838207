//! A real crash: the `herald` binary is killed with SIGKILL in the middle of a turn and started
//! again on the same data folder. The message must be answered exactly once.

use std::time::Duration;

use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::free_port;
use herald_test_support::harness::{init, wait_for, wait_until, Client};
use herald_test_support::herald::{Herald, Running};
use serde_json::Value;

/// The daemon on `port` over `data`, with leases short enough that a restart takes the
/// killed holder's lane over in about two seconds.
fn spawn_daemon(data: &std::path::Path, port: u16, llm: &FakeLlm) -> Running {
    Herald::serve(port, data)
        .fake_model(&llm.base_url())
        .env("HERALD_LLM__TIMEOUT_SECS", "60")
        .fast_leases()
        .env("HERALD_LOG__LEVEL", "warn")
        .spawn()
}

const READY: Duration = Duration::from_secs(30);

#[tokio::test]
async fn sigkill_mid_turn_then_restart_answers_exactly_once() {
    init();
    let llm = FakeLlm::start().await;
    llm.push(Step::Hang);
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let client = Client::for_addr(&format!("127.0.0.1:{port}"));

    let mut first = spawn_daemon(data.path(), port, &llm);
    first.wait_ready(READY).await;
    let base = client.base.clone();
    let pending = tokio::spawn(async move {
        let _ = reqwest::Client::new()
            .post(format!("{base}/api/v1/chat"))
            .json(&serde_json::json!({"lane": "web:crash", "text": "survive this"}))
            .send()
            .await;
    });
    wait_until(
        "the turn to reach the model",
        Duration::from_secs(20),
        || async { llm.request_count() > 0 },
    )
    .await;
    first.kill();
    pending.abort();

    // Restart on the same data folder; the model answers now.
    let mut second = spawn_daemon(data.path(), port, &llm);
    second.wait_ready(READY).await;
    let transcript = wait_for("an answer after restart", READY, async || {
        let t = client.transcript("web:crash").await;
        (t.len() >= 2).then_some(t)
    })
    .await;
    // Nothing left to do in the store: a duplicate would have shown by now.
    herald_test_support::harness::quiet_at(data.path()).await;
    let transcript_after = client.transcript("web:crash").await;
    assert_eq!(transcript_after, transcript);
    assert_eq!(
        transcript,
        vec![
            ("user".to_string(), "survive this".to_string()),
            (
                "assistant".to_string(),
                "reply to: survive this".to_string()
            ),
        ]
    );
    assert_eq!(llm.request_count(), 2, "one call per process, no more");

    // The same question through the API again: the store says it was answered once.
    let (_, body) = client.chat("web:crash", "and now?").await;
    assert_eq!(body["reply"], Value::from("reply to: and now?"));
    second.kill();

    let store = herald::store::connect(
        &format!("sqlite://{}", data.path().join("herald.db").display()),
        1,
    )
    .await
    .unwrap();
    let rows = store.outbox_recent(10).await.unwrap();
    let answers: Vec<_> = rows
        .iter()
        .filter(|r| r.text == "reply to: survive this")
        .collect();
    assert_eq!(answers.len(), 1, "one outbox row for the answer");
    assert_eq!(answers[0].status, "sent");
    let inbox = store
        .inbox_get(answers[0].inbox_id.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(inbox.attempts, 2, "first attempt died with the process");
    let turns = store
        .turns(&herald::domain::LaneKey::new("web:crash"), 10)
        .await
        .unwrap();
    assert_eq!(turns[0].status, "running", "the killed turn never finished");
    assert!(
        turns[1].token > turns[0].token,
        "the restart took the lease over"
    );
}
