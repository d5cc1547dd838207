//! The promise runs' Slack channel (`promise::slack::SlackChannel`) driven by a scripted app
//! in place of the daemon: it loses its socket on the first message (as a killed daemon does),
//! answers every message once with a metadata key, and one message twice with the same key.
//! The receipts must see the redelivery, the one resend and nothing else.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use herald_test_support::promise::load::{self, Channel, LoadSpec};
use herald_test_support::promise::slack::{platform_message_id, SlackChannel};
use serde_json::json;

use super::{ack, call, connect, next_frame};

const ANSWERED_TWICE: &str = "lane 1 message 1";

/// Acks everything, answers each person's message once (`ANSWERED_TWICE` twice, same key),
/// and drops its first socket on the first message without acking it.
async fn scripted_app(channel: SlackChannel) {
    let fake = channel.fake();
    let bot = fake.config().bot_token.clone();
    let (mut ws, _) = connect(fake).await;
    let mut lost_socket = false;
    let mut answered = HashSet::new();
    while let Some(frame) = next_frame(&mut ws, Duration::from_secs(60)).await {
        if frame["type"] != "events_api" {
            continue;
        }
        let envelope_id = frame["envelope_id"].as_str().unwrap().to_string();
        let event = frame["payload"]["event"].clone();
        let from_person = event["type"] == "message" && event.get("bot_id").is_none();
        if from_person && !lost_socket {
            lost_socket = true;
            drop(ws);
            ws = connect(fake).await.0;
            continue;
        }
        let ts = event["ts"].as_str().unwrap_or_default().to_string();
        if from_person && answered.insert(ts.clone()) {
            let text = event["text"].as_str().unwrap();
            let copies = if text == ANSWERED_TWICE { 2 } else { 1 };
            for _ in 0..copies {
                let metadata = json!({"event_type": "herald_outbox", "event_payload": {"key": format!("k-{ts}")}});
                let args = json!({"channel": event["channel"], "text": format!("reply to: {text}"), "metadata": metadata});
                let posted = call(fake, "chat.postMessage", Some(&bot), args).await;
                assert_eq!(posted.body["ok"], true, "{}", posted.body);
            }
        }
        ack(&mut ws, &envelope_id).await;
    }
}

#[tokio::test]
async fn the_receipts_count_what_people_saw() {
    herald_test_support::harness::init();
    let channel = SlackChannel::start().await;
    channel.fake().set_ack_timeout(Duration::from_millis(300));
    let env: Vec<String> = channel.daemon_env().into_iter().map(|(k, _)| k).collect();
    assert!(
        env.contains(&"HERALD_SLACK__APP_TOKEN".to_string()),
        "{env:?}"
    );
    let app = tokio::spawn(scripted_app(channel.clone()));

    let spec = LoadSpec {
        lanes: 3,
        min_per_lane: 3,
        keep_going: Arc::new(AtomicBool::new(false)),
        lane_prefix: "p".into(),
        give_up: Duration::from_secs(30),
    };
    let sent = load::run(channel.clone(), spec).await;
    // The app acks right after its post: the last ack may trail the answer the load saw.
    let r = channel
        .fake()
        .wait_for("every message acknowledged", super::WAIT, |_| {
            let r = channel.receipts(&[]);
            (r.unacked == 0).then_some(r)
        })
        .await;
    app.abort();
    assert_eq!(sent.len(), 9);
    assert!(sent.iter().all(|s| s.inbox_id == 0), "{sent:?}");
    assert_eq!(sent[0].lane, "slack:DLANE0000");
    let first = &channel.fake().posted_in("DLANE0000")[0];
    assert_eq!(first.text, "reply to: lane 0 message 0");
    let message_ts = channel.fake().channel_view("DLANE0000")[0].0.clone();
    assert_eq!(
        sent[0].client_id,
        platform_message_id("DLANE0000", &message_ts)
    );
    assert_eq!(channel.platform_id("p-0-0"), sent[0].client_id);

    assert_eq!(r.messages, 9);
    assert_eq!(r.posts, 10);
    assert_eq!(r.answered_exactly_once, 8);
    assert_eq!(r.answered_more_than_once, 1);
    assert_eq!((r.resends, r.resends_across_a_kill), (1, 0));
    assert_eq!((r.posts_without_key, r.posts_not_replies), (0, 0));
    assert_eq!((r.envelopes, r.unacked), (9, 0));
    assert!(
        r.redeliveries >= 1,
        "the lost socket's envelope came back: {r:?}"
    );
    assert!(!r.promise_held(), "a resend breaks the promise");
}
