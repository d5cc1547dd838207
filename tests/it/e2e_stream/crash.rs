//! SIGKILL in the middle of a streamed answer: the real `herald` binary shows a partial
//! preview in the fake Telegram chat, is killed, and starts again on the same data folder. The
//! retried turn edits the recorded preview message instead of sending another, so the person
//! ends with exactly one message holding exactly the retried answer.

use std::time::{Duration, Instant};

use herald::adapters::telegram::format::markdown_to_html;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::message_json;
use herald_test_support::harness::wait_until;
use herald_test_support::herald::{Herald, Running};
use herald_test_support::telegram::{fakes, TOKEN, USER};

use super::long_answer;

fn spawn_daemon(data: &std::path::Path, llm: &FakeLlm, tg_url: &str) -> Running {
    Herald::serve_anywhere(data)
        .fake_model(&llm.base_url())
        .env("HERALD_LLM__TIMEOUT_SECS", "60")
        .fast_leases()
        .env("HERALD_TELEGRAM__TOKEN", TOKEN)
        .env("HERALD_TELEGRAM__API_URL", tg_url)
        .env("HERALD_TELEGRAM__ALLOW_ALL_USERS", "true")
        .env("HERALD_TELEGRAM__POLL_TIMEOUT_SECS", "1")
        .env("HERALD_STREAMING__ENABLED", "true")
        .env("HERALD_STREAMING__EDIT_INTERVAL_MS", "300")
        .env("HERALD_LOG__LEVEL", "warn")
        .spawn()
}

#[tokio::test]
async fn sigkill_mid_stream_then_restart_leaves_exactly_one_answer() {
    let (tg, llm, data) = fakes().await;
    // The first run streams for ~6 s; it is killed part way. The retry writes another answer.
    llm.push(Step::stream(
        &long_answer(150),
        10,
        Duration::from_millis(60),
    ));
    let retried = format!("retried: {}", long_answer(40));
    llm.push(Step::stream(&retried, 20, Duration::from_millis(30)));
    let mut first = spawn_daemon(data.path(), &llm, &tg.url());
    tg.push_message(|id| message_json(id, USER, USER, "a long answer please"));

    wait_until(
        "a preview with a few edits",
        Duration::from_secs(30),
        || async { tg.sent_messages().len() == 1 && tg.edits().len() >= 2 },
    )
    .await;
    first.kill();
    let partial = tg.chat_view(USER);
    assert_eq!(partial.len(), 1);
    assert!(
        partial[0].text.starts_with("word0"),
        "a partial preview: {:?}",
        partial[0].text
    );

    let mut second = spawn_daemon(data.path(), &llm, &tg.url());
    let want = vec![markdown_to_html(&retried)];
    let started = Instant::now();
    wait_until(
        "the retried answer replaces the preview",
        Duration::from_secs(40),
        || async {
            tg.chat_view(USER)
                .into_iter()
                .map(|m| m.text)
                .collect::<Vec<_>>()
                == want
        },
    )
    .await;
    // Nothing left to send: a duplicate would have shown by now.
    herald_test_support::harness::quiet_at(data.path()).await;
    assert_eq!(
        tg.sent_messages().len(),
        1,
        "no second message: the retry edited the recorded preview ({:?} after restart)",
        started.elapsed()
    );
    assert_eq!(
        tg.chat_view(USER)
            .into_iter()
            .map(|m| m.text)
            .collect::<Vec<_>>(),
        want
    );
    assert_eq!(llm.request_count(), 2);
    second.kill();
}
