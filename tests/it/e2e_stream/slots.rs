//! Streamed turns and the worker slots: more chats stream at once than there are slots, each
//! person writing again as soon as they see an answer, and every message is answered without
//! any chat waiting for an idle worker's timeout (`lanes.idle_secs`, set far beyond the wait).
//!
//! The model streams each answer whole and then keeps the stream open a moment, so each person
//! reads the answer in the preview and writes again while the turn is still running: the wake
//! for the next message reaches the lane's worker before the turn ends, the case that once left
//! a drained worker holding its slot while other chats waited for one.
//!
//! What is asserted is what people see: each chat ends showing one answer per message, each
//! exactly the model's text.

use std::time::Duration;

use herald::app::App;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::{message_json, FakeTelegram};
use herald_test_support::harness::wait_until;
use herald_test_support::telegram::{fakes, tg_config};

/// Far shorter than `idle_secs`: a message left for an idle worker to time out never arrives.
const WAIT: Duration = Duration::from_secs(40);
const CHATS: i64 = 6;
const MESSAGES: usize = 4;
const FIRST_CHAT: i64 = 2001;
/// How long the model's stream stays open after the answer's text.
const TAIL: Duration = Duration::from_millis(250);

/// The answers the chat shows now (the fake's view after edits).
fn answers(tg: &FakeTelegram, chat: i64) -> Vec<String> {
    tg.chat_view(chat).into_iter().map(|m| m.text).collect()
}

/// One person: a message, then the next as soon as its answer shows in the chat.
async fn converse(tg: &FakeTelegram, llm: &FakeLlm, chat: i64) {
    for k in 0..MESSAGES {
        let text = format!("chat {chat} message {k}");
        // The whole answer at once, then the stream stays open: the turn outlives the preview.
        llm.push_when(
            &text,
            Step::Stream {
                pieces: vec![format!("reply to: {text}"), String::new()],
                delay: TAIL,
                cut_after: None,
            },
        );
        tg.push_message(|id| message_json(id, chat, chat, &text));
        let want = format!("reply to: {text}");
        wait_until(
            &format!("chat {chat} sees the answer to message {k}"),
            WAIT,
            || async { answers(tg, chat).contains(&want) },
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_streaming_chats_than_worker_slots_are_all_answered_without_waiting_idle() {
    let (tg, llm, data) = fakes().await;
    let mut c = tg_config(&tg, &llm, &data);
    c.streaming.chats = Some(herald::config::StreamChats::Private);
    c.lanes.max_workers = 2;
    c.lanes.idle_secs = 3600;
    let chats: Vec<i64> = (FIRST_CHAT..FIRST_CHAT + CHATS).collect();
    c.telegram.allowed_users = chats.iter().map(|c| c.to_string()).collect();
    let app = App::start(c).await.expect("app starts");

    futures::future::join_all(chats.iter().map(|&chat| converse(&tg, &llm, chat))).await;

    for &chat in &chats {
        let want: Vec<String> = (0..MESSAGES)
            .map(|k| format!("reply to: chat {chat} message {k}"))
            .collect();
        wait_until(
            &format!("chat {chat} shows its final answers"),
            WAIT,
            || async { answers(&tg, chat) == want },
        )
        .await;
    }
    app.shutdown().await;
}
