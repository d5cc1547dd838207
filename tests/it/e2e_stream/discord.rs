//! Streaming on Discord: the real serenity client against the fake Discord. The preview is
//! one channel message edited in place (PATCH), the final edit makes it the exact answer, and
//! an answer past 2,000 characters continues in a second message.

use std::time::{Duration, Instant};

use herald::adapters::split::{split_message, Measure, DISCORD_LIMIT};
use herald::app::App;
use herald::config::Secret;
use herald_test_support::fake_discord::{within, FakeDiscord};
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, wait_until};

use super::{long_answer, streaming_on, too_fast};

const TOKEN: &str = "fake-token";
const USER: u64 = 42;
const DM: u64 = 900;
const WAIT: Duration = Duration::from_secs(30);

async fn start(llm: &FakeLlm, data: &tempfile::TempDir) -> (FakeDiscord, App) {
    init();
    let fake = FakeDiscord::start(TOKEN).await;
    let mut c = test_config(llm, data);
    c.discord.token = Some(Secret::new(TOKEN));
    c.discord.api_url = fake.api_url().parse().unwrap();
    c.discord.ratelimiter = false;
    c.discord.allowed_users = vec![USER.to_string()];
    c.discord.rate_limit_wait_ms = 300;
    streaming_on(&mut c);
    let app = App::start(c).await.expect("herald starts");
    fake.wait_ready(WAIT).await;
    (fake, app)
}

async fn wait_final(fake: &FakeDiscord, want: &[String]) {
    wait_until("the channel shows the final answer", WAIT, || async {
        let view: Vec<String> = fake
            .channel_view(DM)
            .into_iter()
            .map(|m| m.content)
            .collect();
        view == want
    })
    .await;
}

#[tokio::test]
async fn discord_streams_one_message_edited_to_the_exact_answer() {
    within("discord streaming", Duration::from_secs(60), async {
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().unwrap();
        let answer = long_answer(120);
        llm.push(Step::stream(&answer, 20, Duration::from_millis(60)));
        let (fake, app) = start(&llm, &data).await;
        let mid = fake.dispatch_message_create(DM, None, USER, "tell me", false, None);

        wait_final(&fake, std::slice::from_ref(&answer)).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sent = fake.sent_with_times();
        assert_eq!(sent.len(), 1, "one message for the answer");
        let (first, first_at) = &sent[0];
        assert_eq!(
            first.reference,
            Some(mid),
            "the preview replies to the question"
        );
        assert!(
            first.content.len() < answer.len(),
            "the first preview is partial"
        );
        let edits = fake.edits();
        let last = edits.last().expect("edited");
        assert!(
            last.at - *first_at > Duration::from_millis(1200),
            "the first words came long before the end"
        );
        let mut times: Vec<Instant> = edits.iter().map(|e| e.at).collect();
        times.push(*first_at);
        assert_eq!(
            too_fast(times),
            Vec::<Duration>::new(),
            "edits kept the pace"
        );
        assert_eq!(fake.unknown_routes(), Vec::<String>::new());
        app.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn discord_an_answer_past_the_limit_continues_in_a_second_message() {
    within("discord long streaming", Duration::from_secs(60), async {
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().unwrap();
        let answer = long_answer(400); // ~3,000 characters
        llm.push(Step::stream(&answer, 150, Duration::from_millis(40)));
        let (fake, app) = start(&llm, &data).await;
        fake.dispatch_message_create(DM, None, USER, "an essay", false, None);

        let want = split_message(&answer, DISCORD_LIMIT, Measure::Chars);
        assert_eq!(want.len(), 2);
        wait_final(&fake, &want).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(fake.sent_messages().len(), 2, "one continuation, no copy");
        app.shutdown().await;
    })
    .await;
}
