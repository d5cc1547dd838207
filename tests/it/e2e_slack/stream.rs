//! Streaming on Slack: the preview is one message edited in place with `chat.update`, never
//! faster than once per 1.2 s (the method's Tier 3 limit), and the final edit makes it the
//! exact answer, carrying the outbox key.

use std::time::{Duration, Instant};

use herald_test_support::fake_llm::Step;
use herald_test_support::harness::wait_until;

use super::{fakes, slack_config, start, USER, WAIT};

#[tokio::test]
async fn a_streamed_answer_is_one_message_edited_at_slacks_pace() {
    let (fake, llm, data) = fakes().await;
    let answer = (0..120)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    llm.push(Step::stream(&answer, 20, Duration::from_millis(60)));
    let mut c = slack_config(&fake, &llm, &data, "");
    c.streaming.enabled = Some(true);
    c.streaming.edit_interval_ms = 300;
    let app = start(c).await;
    fake.wait_connected(WAIT).await;
    let dm = fake.dm_channel(USER);
    fake.dm(USER, "tell me");
    wait_until("the DM shows the final answer", WAIT, || {
        let bot: Vec<String> = fake
            .channel_view(&dm)
            .into_iter()
            .filter(|(_, who, _)| who != USER)
            .map(|(_, _, text)| text)
            .collect();
        let done = bot == [answer.clone()];
        async move { done }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let posts = fake.posted_in(&dm);
    assert_eq!(posts.len(), 1, "one message for the answer");
    assert!(
        posts[0].text.len() < answer.len(),
        "the first preview is partial"
    );
    let edits: Vec<_> = fake
        .edits()
        .into_iter()
        .filter(|e| e.ts == posts[0].ts)
        .collect();
    let last = edits.last().expect("edited");
    assert_eq!(last.text, answer);
    assert!(
        last.args["metadata"]["event_payload"]["key"]
            .as_str()
            .is_some(),
        "the final edit carries the outbox key: {}",
        last.args
    );
    let mut at: Vec<Instant> = edits.iter().map(|e| e.at).collect();
    at.push(posts[0].at);
    at.sort();
    let fast: Vec<Duration> = at
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|gap| *gap < Duration::from_millis(1000))
        .collect();
    // The final edit is the answer itself and is never held back; the previews keep the pace.
    assert!(fast.len() <= 1, "edits closer than Slack's pace: {fast:?}");
    app.shutdown().await;
}
