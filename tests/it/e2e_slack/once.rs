//! Exactly once out, although Slack has no idempotency key: a post Slack took while its
//! answer was lost (here: the first attempt failed, and the message is in the channel with
//! the row's key, as after a crash between Slack's accept and `mark_sent`) is found again by
//! the key in its metadata and recorded, not posted a second time.

use std::time::Duration;

use herald_test_support::fake_slack::Fault;
use herald_test_support::harness::wait_until;
use serde_json::json;

use super::{fakes, slack_config, start, USER, WAIT};

#[tokio::test]
async fn a_row_slack_already_has_is_recorded_not_posted_again() {
    let (fake, llm, data) = fakes().await;
    let app = start(slack_config(&fake, &llm, &data, "")).await;
    fake.wait_connected(WAIT).await;
    let dm = fake.dm_channel(USER);
    fake.fail_next("chat.postMessage", 1, Fault::Error("internal_error".into()));
    fake.dm(USER, "hello once");
    wait_until("the first attempt", WAIT, || {
        let n = fake.calls("chat.postMessage").len();
        async move { n >= 1 }
    })
    .await;
    let row = app
        .store
        .outbox_recent(10)
        .await
        .unwrap()
        .pop()
        .expect("the reply's row");
    // The message Slack "took" on that attempt, carrying the row's key (the bot's own post).
    let seeded: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/chat.postMessage", fake.api_url()))
        .bearer_auth(&fake.config().bot_token)
        .json(&json!({"channel": dm, "text": "reply to: hello once",
            "metadata": {"event_type": "herald_outbox", "event_payload": {"key": row.idem_key}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let seeded_ts = seeded["ts"].as_str().expect("posted").to_string();
    wait_until("the row is recorded as sent", WAIT, || {
        let store = app.store.clone();
        async move {
            let rows = store.outbox_recent(10).await.unwrap();
            rows.iter().any(|r| r.platform_message_id.is_some())
        }
    })
    .await;
    let rows = app.store.outbox_recent(10).await.unwrap();
    assert_eq!(
        rows[0].platform_message_id.as_deref(),
        Some(seeded_ts.as_str())
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        fake.posted_in(&dm).len(),
        1,
        "one message in the DM, not two"
    );
    let looked = fake.calls("conversations.history");
    assert!(
        looked
            .iter()
            .any(|c| c.args["include_all_metadata"] == "true"),
        "the retry looked in the history with metadata: {looked:?}"
    );
    app.shutdown().await;
}
