//! The Events API mode: Slack POSTs signed requests to the daemon's own routes. A good
//! signature is answered, an unsigned, stale or forged one is 401 and reaches nothing.

use herald_test_support::fake_slack::Signing;
use serde_json::json;

use super::{fakes, posts_in, slack_config, start, USER};

#[tokio::test]
async fn signed_events_are_answered_and_unsigned_stale_or_forged_ones_are_refused() {
    let (fake, llm, data) = fakes().await;
    let app = start(slack_config(&fake, &llm, &data, "mode = \"events\"\n")).await;
    let base = format!("http://{}", app.addr);
    fake.events_target(&format!("{base}/slack/events"));
    fake.interactive_target(&format!("{base}/slack/interactive"));
    fake.commands_target(&format!("{base}/slack/commands"));

    let challenge = fake
        .url_verification("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
        .await;
    assert_eq!(challenge.status, 200);
    assert!(challenge
        .body
        .contains("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"));

    let dm = fake.dm_channel(USER);
    let event = |text: &str, ts: &str| {
        json!({"type": "message", "channel": dm, "channel_type": "im", "user": USER,
               "text": text, "ts": ts, "event_ts": ts})
    };
    for (signing, ts) in [
        (Signing::Unsigned, "1700000001.000001"),
        (Signing::Stale { age_secs: 6 * 60 }, "1700000002.000002"),
        (Signing::WrongSecret, "1700000003.000003"),
        (Signing::MissingTimestamp, "1700000004.000004"),
    ] {
        let reply = fake.post_event_signed(event("forged", ts), signing).await;
        assert_eq!(reply.status, 401, "{signing:?}");
        assert!(!reply.body.contains("forged"));
    }
    let reply = fake
        .post_event_signed(event("a signed hello", "1700000005.000005"), Signing::Valid)
        .await;
    assert_eq!(reply.status, 200);
    let posts = posts_in(&fake, &dm, 1).await;
    assert_eq!(posts[0].text, "reply to: a signed hello");
    // A retry of the same event (Slack's X-Slack-Retry-Num) is one answer.
    let again = fake
        .post_event_signed(event("a signed hello", "1700000005.000005"), Signing::Valid)
        .await;
    assert_eq!(again.status, 200);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(fake.posted_in(&dm).len(), 1);
    let inputs: Vec<String> = llm.requests().iter().map(|r| r.last_user()).collect();
    assert_eq!(
        inputs,
        ["a signed hello"],
        "no forged post reached the model"
    );

    // Through the fake's own delivery (signed, retried on failure): a DM and a slash command.
    fake.dm(USER, "second message");
    let posts = posts_in(&fake, &dm, 2).await;
    assert_eq!(posts[1].text, "reply to: second message");
    fake.slash("/herald", "new", USER, &dm);
    let posts = posts_in(&fake, &dm, 3).await;
    assert_ne!(
        posts[2].text, "reply to: new",
        "the command is the core's: {}",
        posts[2].text
    );
    app.shutdown().await;
}
