//! End to end through the Telegram adapter: the real core and the real teloxide client against
//! the fake Bot API server and the fake model, SQLite in a temp dir. Every wait is bounded.

mod durability;
mod status;

use std::time::Duration;

use herald::adapters::split::{split_message, Measure, TELEGRAM_LIMIT};
use herald::adapters::telegram::format::markdown_to_html;
use herald::app::App;
use herald::domain::LaneKey;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::{
    message_json, with_mention, FakeTelegram, Fault, BOT_USERNAME,
};
use herald_test_support::harness::wait_until;
use herald_test_support::telegram::{fakes, start, tg_config, USER};

pub const WAIT: Duration = Duration::from_secs(20);

/// The user texts the model was asked about, in order.
pub fn model_inputs(llm: &FakeLlm) -> Vec<String> {
    llm.requests().iter().map(|r| r.last_user()).collect()
}

/// Pushes a private message and returns its Telegram message id.
fn push_private(tg: &FakeTelegram, chat: i64, text: &str) -> i64 {
    let mut mid = 0;
    tg.push_message(|id| {
        mid = id;
        message_json(id, chat, chat, text)
    });
    mid
}

#[tokio::test]
async fn private_chat_round_trip() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data).await;
    let mid = push_private(&tg, USER, "hello there");

    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].chat_id, USER);
    assert_eq!(sent[0].text, "reply to: hello there");
    assert_eq!(
        sent[0].reply_to,
        Some(mid),
        "the answer quotes the question"
    );
    assert_eq!(sent[0].parse_mode.as_deref(), Some("HTML"));
    assert_eq!(model_inputs(&llm), ["hello there"]);
    assert!(!tg.calls("sendChatAction").is_empty(), "typing was shown");
    let commands = tg.calls("setMyCommands");
    let names: Vec<&str> = commands[0]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["start", "new", "stop", "status", "usage", "help", "agent", "wrapup"]
    );
    let delete = tg.calls("deleteWebhook");
    assert!(!delete.is_empty(), "polling starts by removing any webhook");
    assert_ne!(
        delete[0]["drop_pending_updates"], true,
        "pending updates are kept"
    );

    // A command is handled by the core, not the model.
    push_private(&tg, USER, "/status");
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert!(sent[1].text.starts_with("Session "), "{}", sent[1].text);
    assert_eq!(llm.request_count(), 1);
    app.shutdown().await;
}

#[tokio::test]
async fn group_answers_only_when_mentioned_replied_to_or_commanded() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data).await;
    let g = -100_500;
    tg.push_group_text(g, USER, "just chatting among humans", None);
    tg.push_group_text(g, USER, "/new@OtherBot", None);
    let mention = format!("@{BOT_USERNAME} what time is it");
    tg.push_group_text(g, USER, &mention, Some(&format!("@{BOT_USERNAME}")));
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].chat_id, g);
    assert_eq!(
        sent[0].text, "reply to: what time is it",
        "the mention is stripped"
    );

    tg.push_reply(g, USER, "and tomorrow?", sent[0].message_id);
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "reply to: and tomorrow?");
    tg.push_group_text(g, USER, "/status@herald_test_bot", None);
    let sent = tg.wait_for_sent(3, WAIT).await;
    assert!(sent[2].text.starts_with("Session "), "{}", sent[2].text);

    assert_eq!(model_inputs(&llm), ["what time is it", "and tomorrow?"]);
    assert_eq!(tg.sent_messages().len(), 3, "nothing else was answered");
    app.shutdown().await;
}

#[tokio::test]
async fn free_response_group_answers_everything() {
    let (tg, llm, data) = fakes().await;
    let mut c = tg_config(&tg, &llm, &data);
    c.telegram.free_response_chats = vec!["-100501".into()];
    let app = App::start(c).await.unwrap();
    tg.push_group_text(-100_501, USER, "no mention needed", None);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].text, "reply to: no mention needed");
    app.shutdown().await;
}

#[tokio::test]
async fn forum_topics_are_separate_lanes() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data).await;
    let g = -100_600;
    let addressed = |thread: i64, text: &str| {
        let text = format!("@{BOT_USERNAME} {text}");
        tg.push_message(|id| {
            let mut m = message_json(id, g, USER, &text);
            herald_test_support::fake_telegram::in_topic(&mut m, thread);
            with_mention(&mut m, &format!("@{BOT_USERNAME}"));
            m
        });
    };
    addressed(11, "topic one");
    addressed(22, "topic two");
    let sent = tg.wait_for_sent(2, WAIT).await;
    for m in &sent {
        let want = if m.thread_id == Some(11) {
            "reply to: topic one"
        } else {
            "reply to: topic two"
        };
        assert_eq!(m.text, want, "answer lands in its own topic");
    }
    addressed(11, "more in one");
    tg.wait_for_sent(3, WAIT).await;
    let last = llm
        .requests()
        .into_iter()
        .find(|r| r.last_user() == "more in one")
        .unwrap();
    let history: Vec<String> = last
        .messages()
        .iter()
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect();
    assert!(history.iter().any(|c| c == "topic one"));
    assert!(
        !history.iter().any(|c| c == "topic two"),
        "topics do not share a session"
    );
    let s11 = app
        .store
        .session_current(&LaneKey::new("telegram:-100600:11"))
        .await
        .unwrap()
        .unwrap();
    let s22 = app
        .store
        .session_current(&LaneKey::new("telegram:-100600:22"))
        .await
        .unwrap()
        .unwrap();
    assert_ne!(s11.id, s22.id);
    app.shutdown().await;
}

/// About 10,000 characters: prose with emoji (2 UTF-16 units each) and a long code block that
/// straddles a chunk boundary.
fn long_answer() -> String {
    let mut s = String::new();
    for i in 0..24 {
        s.push_str(&format!("Paragraph {i}: the quick brown fox 🦊 jumps over the lazy dog 🐶, again and again, to fill the line.\n\n"));
    }
    s.push_str("```rust\n");
    for i in 0..110 {
        s.push_str(&format!("let value_{i} = compute({i}) * 2; // 😀\n"));
    }
    s.push_str("```\n\n");
    while s.chars().count() < 10_000 {
        s.push_str("Closing words with an emoji 🎉 and some more text to reach the size. ");
    }
    s
}

#[tokio::test]
async fn a_long_answer_arrives_as_ordered_chunks_within_the_limit() {
    let (tg, llm, data) = fakes().await;
    let answer = long_answer();
    llm.push(Step::Reply(answer.clone()));
    let app = start(&tg, &llm, &data).await;
    let mid = push_private(&tg, USER, "tell me everything");

    let chunks = split_message(&answer, TELEGRAM_LIMIT, Measure::Utf16);
    assert!(chunks.len() >= 3, "the answer needs several messages");
    let sent = tg
        .wait_for_sent(chunks.len(), Duration::from_secs(30))
        .await;
    herald_test_support::harness::quiet(&*app.store).await;
    let sent_now = tg.sent_messages();
    assert_eq!(sent_now.len(), chunks.len(), "no extra message");
    for (i, (m, chunk)) in sent.iter().zip(&chunks).enumerate() {
        assert!(chunk.encode_utf16().count() <= TELEGRAM_LIMIT);
        assert_eq!(m.text, markdown_to_html(chunk), "chunk {i} in order");
        assert_eq!(
            m.reply_to,
            if i == 0 { Some(mid) } else { None },
            "chunk {i}"
        );
    }
    let fences_balanced = chunks.iter().all(|c| c.matches("```").count() % 2 == 0);
    assert!(
        fences_balanced,
        "every chunk closes the code block it opens"
    );
    // Only the answer's first message may spend the chat's burst: the rest leave at Telegram's
    // one message a second (less a little for the fake's own receive jitter).
    let times: Vec<_> = tg.sent_with_times().into_iter().map(|(_, at)| at).collect();
    for (i, pair) in times.windows(2).enumerate() {
        let gap = pair[1].duration_since(pair[0]);
        assert!(
            gap >= Duration::from_millis(900),
            "chunk {} left {gap:?} after chunk {i}",
            i + 1
        );
    }
    app.shutdown().await;
}

#[tokio::test]
async fn rate_limited_then_success_gives_exactly_one_copy() {
    let (tg, llm, data) = fakes().await;
    tg.fail_next("sendMessage", Fault::RetryAfter(1));
    let app = start(&tg, &llm, &data).await;
    push_private(&tg, USER, "are you there?");
    tg.wait_for_sent(1, WAIT).await;
    herald_test_support::harness::quiet(&*app.store).await;
    let sent = tg.sent_messages();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].text, "reply to: are you there?");
    assert_eq!(
        tg.calls("sendMessage").len(),
        2,
        "one refused, one accepted"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn rejected_formatting_falls_back_to_one_plain_copy() {
    let (tg, llm, data) = fakes().await;
    llm.push(Step::Reply("**bold** and `code` & more".into()));
    tg.fail_next("sendMessage", Fault::BadEntities);
    let app = start(&tg, &llm, &data).await;
    push_private(&tg, USER, "format something");
    tg.wait_for_sent(1, WAIT).await;
    herald_test_support::harness::quiet(&*app.store).await;
    let sent = tg.sent_messages();
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0].parse_mode, None);
    assert_eq!(
        sent[0].text, "**bold** and `code` & more",
        "the plain text, unchanged"
    );
    assert_eq!(tg.calls("sendMessage").len(), 2);
    app.shutdown().await;
}

#[tokio::test]
async fn unauthorized_sender_costs_no_model_call() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data).await;
    let stranger = 999;
    let stranger_update = tg.push_private_text(stranger, stranger, "let me in");
    push_private(&tg, USER, "hi, it's me");
    // Two sends: the user's answer and the stranger's pairing code.
    let sent = tg.wait_for_sent(2, WAIT).await;
    let lane = LaneKey::new(&format!("telegram:{stranger}"));
    let store = app.store.clone();
    wait_until("the stranger's update to be taken and closed", WAIT, || {
        let store = store.clone();
        let lane = lane.clone();
        async move {
            let offset = store
                .kv_get("telegram:offset")
                .await
                .unwrap()
                .and_then(|s| s.parse::<i64>().ok());
            offset.is_some_and(|o| o > stranger_update)
                && store.inbox_pending(&lane, 10).await.unwrap().is_empty()
        }
    })
    .await;
    assert_eq!(model_inputs(&llm), ["hi, it's me"]);
    // The stranger's only answer is a pairing code (private chat), never a model reply.
    let to_stranger: Vec<_> = sent.iter().filter(|m| m.chat_id == stranger).collect();
    assert_eq!(to_stranger.len(), 1);
    assert!(
        to_stranger[0].text.contains("pairing code"),
        "{}",
        to_stranger[0].text
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_malformed_update_in_a_batch_does_not_block_the_next_ones() {
    let (tg, llm, data) = fakes().await;
    // All queued before the daemon starts, so they come in one getUpdates batch.
    let first = tg.push_private_text(USER, USER, "first");
    tg.push_update_raw(serde_json::json!({ "update_id": first + 1, "message": { "message_id": "oops", "chat": 5 } }));
    tg.push_update_raw(
        serde_json::json!({ "update_id": first + 2, "a_kind_from_the_future": { "x": 1 } }),
    );
    let last = tg.push_private_text(USER, USER, "third");
    assert_eq!(last, first + 3);
    let app = start(&tg, &llm, &data).await;
    let sent = tg.wait_for_sent(2, WAIT).await;
    let texts: Vec<&str> = sent.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["reply to: first", "reply to: third"]);
    wait_until("the batch to be confirmed", WAIT, || async {
        tg.pending_updates() == 0
    })
    .await;
    assert_eq!(
        app.store.kv_get("telegram:offset").await.unwrap(),
        Some((last + 1).to_string())
    );
    app.shutdown().await;
}
