//! One long reply never holds up other chats (issue #34), and streaming's default (private
//! chats stream, groups do not): the real core and teloxide client against the fake Bot API,
//! with Telegram pacing on as in production.
//!
//! What is asserted is what people see: when each `sendMessage` reached the fake, in which
//! chat and with which text.

use std::time::Duration;

use herald::app::App;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::FakeTelegram;
use herald_test_support::harness::wait_until;
use herald_test_support::telegram::{fakes, tg_config, USER};

const WAIT: Duration = Duration::from_secs(30);
/// A second person with a private chat of their own.
const OTHER: i64 = 1002;

/// A plain answer of `paragraphs` paragraphs of about 1,000 characters each.
fn long_answer(paragraphs: usize) -> String {
    (0..paragraphs)
        .map(|p| {
            (0..125)
                .map(|w| format!("p{p:02}w{w:03}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

async fn start(tg: &FakeTelegram, llm: &FakeLlm, data: &tempfile::TempDir) -> App {
    let mut c = tg_config(tg, llm, data);
    assert!(c.telegram.pacing, "pacing is on, as in production");
    c.telegram.allowed_users.push(OTHER.to_string());
    App::start(c).await.expect("app starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_paced_reply_does_not_hold_up_another_chat() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data).await;
    let long = long_answer(20);
    llm.push(Step::Reply(long.clone()));
    tg.push_private_text(USER, USER, "tell me everything");
    wait_until("the long answer's first chunk", WAIT, || async {
        tg.sent_messages().iter().any(|m| m.chat_id == USER)
    })
    .await;
    // The other person writes right after; the fake model echoes them.
    tg.push_private_text(OTHER, OTHER, "quick question");
    wait_until("both answers complete", WAIT, || async {
        let sent = tg.sent_messages();
        let a: String = sent
            .iter()
            .filter(|m| m.chat_id == USER)
            .map(|m| m.text.clone())
            .collect();
        sent.iter().any(|m| m.chat_id == OTHER) && a.len() >= long.len() - 100
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await; // nothing more arrives
    let sent = tg.sent_with_times();
    let a: Vec<_> = sent.iter().filter(|(m, _)| m.chat_id == USER).collect();
    let b: Vec<_> = sent.iter().filter(|(m, _)| m.chat_id == OTHER).collect();
    assert!(a.len() >= 4, "a multi-chunk answer: {} chunks", a.len());
    assert_eq!(b.len(), 1, "one reply to the other person");
    assert_eq!(b[0].0.text, "reply to: quick question");
    let a_last = a.last().unwrap().1;
    assert!(
        b[0].1 < a_last,
        "the other chat's reply waited for the long answer's last chunk ({:?} after it)",
        b[0].1 - a_last
    );
    // The long answer still leaves at Telegram's pace, in order, each chunk once.
    for w in a.windows(2) {
        let gap = w[1].1 - w[0].1;
        assert!(gap >= Duration::from_millis(900), "chunks {gap:?} apart");
    }
    let words: Vec<&str> = a
        .iter()
        .flat_map(|(m, _)| m.text.split_whitespace())
        .collect();
    let want: Vec<&str> = long.split_whitespace().collect();
    assert_eq!(
        words, want,
        "the long answer arrived whole, in order, each chunk once"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn by_default_private_chats_stream_and_groups_do_not() {
    let (tg, llm, data) = fakes().await;
    let group: i64 = -100_555;
    let mut c = tg_config(&tg, &llm, &data);
    c.streaming = Default::default(); // the default, not the harness's "off"
    c.telegram.free_response_chats = vec![group.to_string()];
    let app = App::start(c).await.expect("app starts");
    llm.push(Step::stream(
        "streamed in private",
        3,
        Duration::from_millis(80),
    ));
    tg.push_private_text(USER, USER, "hi in private");
    tg.wait_for_sent(1, WAIT).await;
    wait_until("the private answer in its final form", WAIT, || async {
        tg.chat_view(USER)
            .iter()
            .any(|m| m.text == "streamed in private" && m.parse_mode.is_some())
    })
    .await;
    llm.push(Step::stream(
        "plain in the group",
        4,
        Duration::from_millis(20),
    ));
    tg.push_group_text(group, USER, "hi in the group", None);
    wait_until("the group answer", WAIT, || async {
        tg.sent_messages().iter().any(|m| m.chat_id == group)
    })
    .await;
    let streamed: Vec<bool> = llm
        .requests()
        .iter()
        .map(|r| r.body["stream"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(
        streamed,
        [true, false],
        "private streams, the group does not"
    );
    assert!(
        !tg.edits().is_empty(),
        "the private answer was a preview edited into the answer"
    );
    let group_msgs: Vec<_> = tg
        .sent_messages()
        .into_iter()
        .filter(|m| m.chat_id == group)
        .collect();
    assert_eq!(group_msgs.len(), 1);
    assert_eq!(group_msgs[0].text, "plain in the group");
    assert!(
        tg.edits().iter().all(|e| e.chat_id != group),
        "no preview edits in the group"
    );
    app.shutdown().await;
}
