//! Items 3 and 4 of issue 15: media the agent cannot read gets an answer recorded in the
//! transcript, and a panicking turn does not pin its lane. Same harness as the parent file.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald::app::App;
use herald::domain::{LaneKey, Role};
use serde_json::{json, Value};

use herald_test_support::db::Db;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, test_config, wait_until, Client};

// ---- 3. Media the agent cannot read gets an answer, recorded in the transcript ----

/// A private message from the allowed user carrying `media` instead of text.
fn media_message(message_id: i64, media: Value) -> Value {
    use herald_test_support::fake_telegram::message_json;
    use herald_test_support::telegram::USER;
    let mut m = message_json(message_id, USER, USER, "");
    let obj = m.as_object_mut().unwrap();
    obj.remove("text");
    for (k, v) in media.as_object().unwrap() {
        obj.insert(k.clone(), v.clone());
    }
    m
}

async fn media_only_messages_are_answered(db: Db) {
    use herald_test_support::telegram::{fakes, tg_config, USER};
    let (tg, llm, data) = fakes().await;
    let mut config = tg_config(&tg, &llm, &data);
    db.apply(&mut config);
    let app = App::start(config).await.unwrap();
    let file = |id: &str| json!({"file_id": id, "file_unique_id": format!("u-{id}")});
    let mut voice = file("voice-1");
    voice["duration"] = json!(3);
    voice["mime_type"] = json!("audio/ogg");
    let photo: Vec<Value> = [90, 800]
        .iter()
        .map(|w| {
            let mut p = file(&format!("photo-{w}"));
            p["width"] = json!(w);
            p["height"] = json!(w);
            p
        })
        .collect();
    let mut sticker = file("sticker-1");
    for (k, v) in [
        ("type", json!("regular")),
        ("width", json!(512)),
        ("height", json!(512)),
        ("is_animated", json!(false)),
        ("is_video", json!(false)),
        ("emoji", json!("👍")),
    ] {
        sticker[k] = v;
    }
    let mut document = file("doc-1");
    document["file_name"] = json!("report.pdf");
    document["mime_type"] = json!("application/pdf");
    let cases = [
        (json!({"voice": voice}), "a voice message"),
        (json!({"photo": photo}), "a photo"),
        (json!({"sticker": sticker}), "a sticker"),
        (json!({"document": document}), "a document"),
    ];
    for (media, _) in &cases {
        tg.push_message(|id| media_message(id, media.clone()));
    }
    let sent = tg.wait_for_sent(4, Duration::from_secs(20)).await;
    for ((_, what), s) in cases.iter().zip(&sent) {
        assert_eq!(s.chat_id, USER);
        assert!(
            s.text
                .starts_with(&format!("I received {what} but I can only read text")),
            "{what}: {}",
            s.text
        );
        assert!(s.reply_to.is_some(), "answers the message it is about");
    }
    assert_eq!(
        llm.request_count(),
        0,
        "no model call for what it cannot read"
    );
    let lane = LaneKey::new(&format!("telegram:{USER}"));
    let session = app.store.session_current(&lane).await.unwrap().unwrap();
    let rows = app.store.messages(&session.id, true).await.unwrap();
    let got: Vec<(Role, String)> = rows.iter().map(|m| (m.role, m.content.clone())).collect();
    assert_eq!(got.len(), 8, "{got:?}");
    for (i, (_, what)) in cases.iter().enumerate() {
        assert_eq!(
            got[2 * i],
            (Role::User, format!("[{what} received; not readable yet]"))
        );
        assert_eq!(got[2 * i + 1].0, Role::Assistant);
        assert_eq!(got[2 * i + 1].1, sent[i].text);
    }

    // A person's first text in that session is still its first real turn.
    tg.push_private_text(USER, USER, "Here it is in words: the backup failed.");
    let sent = tg.wait_for_sent(5, Duration::from_secs(20)).await;
    assert_eq!(
        sent[4].text,
        "reply to: Here it is in words: the backup failed."
    );
    app.shutdown().await;
    tg.shutdown().await;
}

herald_test_support::on_each_backend!(
    media_only_messages_are_answered_sqlite,
    media_only_messages_are_answered_postgres,
    media_only_messages_are_answered
);

// ---- 4. A panicking turn does not pin its lane ----

async fn a_panicking_turn_does_not_pin_the_lane(db: Db) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.web.reply_timeout_secs = 15;
    db.apply(&mut config);
    let ttl = Duration::from_secs(config.lanes.lease_ttl_secs);
    let app = App::start(config).await.unwrap();
    let client = Arc::new(Client::new(&app));
    let lane = "web:panic";
    assert_eq!(client.chat(lane, "hello").await.0, 200);

    let boom = format!("boom {}", uuid::Uuid::new_v4());
    herald::lanes::fault::panic_once_on(&boom);
    let c = client.clone();
    let b = boom.clone();
    let first = tokio::spawn(async move { c.chat(lane, &b).await });
    // The turn started (its attempt is stored before anything of it can crash), then panicked.
    wait_until(
        "the panicking turn to start",
        Duration::from_secs(10),
        || async {
            app.store
                .inbox_pending(&LaneKey::new(lane), 8)
                .await
                .unwrap()
                .iter()
                .any(|r| r.event.text == boom && r.attempts >= 1)
        },
    )
    .await;

    let started = Instant::now();
    let (status, body) = client.chat(lane, "are you still there?").await;
    let took = started.elapsed();
    println!("the next message was answered {took:?} after the panic (lease expiry {ttl:?})");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "reply to: are you still there?");
    assert!(
        took < ttl,
        "the next message waited {took:?}, the lease expiry is {ttl:?}"
    );
    // The message whose turn panicked was kept and answered on its retry.
    let (status, body) = first.await.unwrap();
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("done")),
        "{body}"
    );
    let (_, metrics) = client.get("/metrics").await;
    assert!(metrics.contains("herald_turn_panics_total"), "{metrics}");
    app.shutdown().await;
}

herald_test_support::on_each_backend!(
    panicking_turn_does_not_pin_the_lane_sqlite,
    panicking_turn_does_not_pin_the_lane_postgres,
    a_panicking_turn_does_not_pin_the_lane
);
