//! Streaming replies end to end (issue #18): the fake model streams a long answer slowly, the
//! real core previews it through the real teloxide client against the fake Bot API (Discord
//! and the web chat in the submodules), and the person ends with exactly one message per
//! answer holding exactly the model's text.
//!
//! What is asserted is what a person sees: the messages in the chat (the fake's view after
//! edits and deletes), when the first words appeared, and how fast the messages changed.

mod crash;
mod discord;
mod slots;
mod web;

use std::time::{Duration, Instant};

use herald::adapters::split::{split_message, Measure, TELEGRAM_LIMIT};
use herald::adapters::telegram::format::markdown_to_html;
use herald::app::App;
use herald::config::Config;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::{message_json, FakeTelegram};
use herald_test_support::harness::wait_until;
use herald_test_support::telegram::{fakes, tg_config, USER};

const WAIT: Duration = Duration::from_secs(30);
/// The edit pace the tests configure (short, to keep them quick).
pub const PACE: Duration = Duration::from_millis(300);

/// A long plain answer (no Markdown, so its HTML form is itself) of about `words` words.
pub fn long_answer(words: usize) -> String {
    (0..words)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn streaming_on(c: &mut Config) {
    c.streaming.enabled = Some(true);
    c.streaming.edit_interval_ms = PACE.as_millis() as u64;
}

/// Consecutive instants closer than the pace (with a little slack for the loopback trip).
pub fn too_fast(mut at: Vec<Instant>) -> Vec<Duration> {
    at.sort();
    at.windows(2)
        .map(|w| w[1] - w[0])
        .filter(|gap| *gap < PACE.mul_f64(0.8))
        .collect()
}

async fn start(tg: &FakeTelegram, llm: &FakeLlm, data: &tempfile::TempDir) -> App {
    let mut c = tg_config(tg, llm, data);
    streaming_on(&mut c);
    App::start(c).await.expect("app starts")
}

fn push_private(tg: &FakeTelegram, text: &str) {
    tg.push_message(|id| message_json(id, USER, USER, text));
}

/// Waits until the chat shows exactly `want` (as final, formatted chunks).
async fn wait_final(tg: &FakeTelegram, want: &[String]) {
    wait_until("the chat shows the final answer", WAIT, || async {
        let view: Vec<String> = tg.chat_view(USER).into_iter().map(|m| m.text).collect();
        view == want
    })
    .await;
}

fn final_chunks(answer: &str) -> Vec<String> {
    split_message(answer, TELEGRAM_LIMIT, Measure::Utf16)
        .iter()
        .map(|c| markdown_to_html(c))
        .collect()
}

#[tokio::test]
async fn telegram_streams_one_message_edited_to_the_exact_answer() {
    let (tg, llm, data) = fakes().await;
    let answer = long_answer(120);
    // ~40 pieces, 60 ms apart: the model writes for about 2.5 s.
    llm.push(Step::stream(&answer, 20, Duration::from_millis(60)));
    let app = start(&tg, &llm, &data).await;
    push_private(&tg, "tell me a long story");

    wait_final(&tg, &final_chunks(&answer)).await;
    let sent = tg.sent_with_times();
    assert_eq!(sent.len(), 1, "one message for the answer: {sent:#?}");
    let (first, first_at) = &sent[0];
    assert_eq!(first.parse_mode, None, "previews are plain text");
    assert!(
        first.text.len() < answer.len(),
        "the first preview is partial"
    );
    let edits = tg.edits();
    let last = edits.last().expect("edited");
    assert_eq!(
        last.parse_mode.as_deref(),
        Some("HTML"),
        "the final edit is formatted"
    );
    assert!(
        last.at - *first_at > Duration::from_millis(1200),
        "the first words came long before the end ({:?} before)",
        last.at - *first_at
    );
    assert!(
        edits.len() >= 3,
        "the message grew in place: {} edits",
        edits.len()
    );
    let mut times: Vec<Instant> = edits.iter().map(|e| e.at).collect();
    times.push(*first_at);
    assert_eq!(
        too_fast(times),
        Vec::<Duration>::new(),
        "edits kept the pace"
    );
    // The sender records the message id once Telegram accepted the final edit, a moment after
    // the fake saw it.
    let want = Some(first.message_id.to_string());
    wait_until(
        "the reply's row records the preview message it finalized",
        WAIT,
        || async { app.store.outbox_recent(5).await.unwrap()[0].platform_message_id == want },
    )
    .await;
    app.shutdown().await;
}

#[tokio::test]
async fn telegram_an_answer_past_the_limit_continues_in_a_second_message() {
    let (tg, llm, data) = fakes().await;
    let answer = long_answer(900); // ~7,000 characters
    llm.push(Step::stream(&answer, 400, Duration::from_millis(40)));
    let app = start(&tg, &llm, &data).await;
    push_private(&tg, "an essay please");

    let want = final_chunks(&answer);
    assert_eq!(want.len(), 2);
    wait_final(&tg, &want).await;
    assert_eq!(tg.sent_messages().len(), 2, "one continuation, no copy");
    app.shutdown().await;
}

#[tokio::test]
async fn telegram_a_stream_cut_mid_way_is_retried_into_one_complete_answer() {
    let (tg, llm, data) = fakes().await;
    let answer = long_answer(60);
    let Step::Stream { pieces, delay, .. } = Step::stream(&answer, 15, Duration::from_millis(50))
    else {
        unreachable!()
    };
    llm.push(Step::Stream {
        pieces: pieces.clone(),
        delay,
        cut_after: Some(pieces.len() / 2),
    });
    llm.push(Step::Stream {
        pieces,
        delay,
        cut_after: None,
    });
    let app = start(&tg, &llm, &data).await;
    push_private(&tg, "go");

    wait_final(&tg, &final_chunks(&answer)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(llm.request_count(), 2, "the cut answer was asked again");
    assert_eq!(
        tg.sent_messages().len(),
        1,
        "one message, never a half answer"
    );
    let view = tg.chat_view(USER);
    assert_eq!(view.len(), 1);
    assert_eq!(view[0].text, markdown_to_html(&answer));
    let stored = app.store.outbox_recent(5).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].text, answer,
        "the committed reply is the whole answer"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn telegram_with_streaming_off_nothing_is_edited() {
    let (tg, llm, data) = fakes().await;
    llm.push(Step::stream(
        "plain old answer",
        5,
        Duration::from_millis(10),
    ));
    let app = App::start(tg_config(&tg, &llm, &data)).await.unwrap();
    push_private(&tg, "hi");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].text, "plain old answer");
    assert_eq!(sent[0].parse_mode.as_deref(), Some("HTML"));
    assert!(tg.edits().is_empty());
    assert_eq!(
        llm.requests()[0].body.get("stream"),
        None,
        "the model call does not stream"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn telegram_text_before_a_tool_call_does_not_stay_in_the_answer() {
    let (tg, llm, data) = fakes().await;
    let preamble = "Let me look that up in our earlier conversations first, one moment please.";
    let Step::Stream { pieces, delay, .. } = Step::stream(preamble, 8, Duration::from_millis(80))
    else {
        unreachable!()
    };
    llm.push(Step::StreamThenTool {
        pieces,
        delay,
        name: "session_search".into(),
        args: r#"{"query":"holiday"}"#.into(),
    });
    let answer = long_answer(50);
    llm.push(Step::stream(&answer, 20, Duration::from_millis(40)));
    let app = start(&tg, &llm, &data).await;
    push_private(&tg, "what did we say about the holiday?");

    wait_until("a preview of the preamble", WAIT, || async {
        tg.chat_view(USER)
            .first()
            .is_some_and(|m| m.text.starts_with("Let me"))
    })
    .await;
    wait_final(&tg, &final_chunks(&answer)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        tg.sent_messages().len(),
        1,
        "the preview message became the answer"
    );
    assert_eq!(llm.request_count(), 2, "the tool ran between the two calls");
    app.shutdown().await;
}

#[tokio::test]
async fn telegram_reasoning_is_shown_live_when_configured_and_never_stored() {
    let (tg, llm, data) = fakes().await;
    let thoughts: Vec<String> = (0..12).map(|i| format!("pondering step {i}. ")).collect();
    let answer = long_answer(30);
    let Step::Stream { pieces, .. } = Step::stream(&answer, 25, Duration::ZERO) else {
        unreachable!()
    };
    llm.push(Step::ThinkThenStream {
        thoughts,
        pieces,
        delay: Duration::from_millis(120),
    });
    let mut c = tg_config(&tg, &llm, &data);
    streaming_on(&mut c);
    c.streaming.show_reasoning = true;
    let app = App::start(c).await.unwrap();
    push_private(&tg, "think about it");

    wait_final(&tg, &final_chunks(&answer)).await;
    let first = &tg.sent_messages()[0];
    assert!(
        first.text.starts_with("Thinking…") && first.text.contains("pondering"),
        "the reasoning was shown before the answer: {:?}",
        first.text
    );
    assert_eq!(tg.sent_messages().len(), 1);
    // Never stored: the next request replays the transcript without it.
    push_private(&tg, "and now?");
    wait_until("the second answer", WAIT, || async {
        llm.request_count() == 2
    })
    .await;
    let replay = llm.requests()[1].body.to_string();
    assert!(
        !replay.contains("pondering"),
        "reasoning reached the transcript"
    );
    assert!(replay.contains("word29"), "the answer is in the transcript");
    app.shutdown().await;
}
