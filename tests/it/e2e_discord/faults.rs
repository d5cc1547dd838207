//! Discord end to end, when things go wrong: a dropped gateway socket, missed heartbeat ACKs,
//! a silent shard for the watchdog, 429 and 500 answers to a send. Same harness as the parent
//! file; every test still expects each answer exactly once.

use std::time::Duration;

use super::{bounded, posts_to, start, start_on, DM, TOKEN, USER, WAIT};
use herald_test_support::fake_discord::{FakeDiscord, Fault};

#[tokio::test]
async fn a_dropped_socket_mid_turn_resumes_and_answers_once() {
    bounded("dropped socket", async {
        // Each message its own answer: the one replayed on RESUME does not join the turn.
        let env = start(|c| c.lanes.mid_turn = herald::config::MidTurn::Queue).await;
        env.llm.set_default_delay(Duration::from_millis(1_500));
        env.fake
            .dispatch_message_create(DM, None, USER, "first", false, None);
        let llm = env.llm.clone();
        env.fake
            .wait_for("the turn to start", WAIT, move |_| {
                (llm.request_count() >= 1).then_some(())
            })
            .await;
        env.fake.drop_socket();
        // Sent while the bot is disconnected: replayed by Discord on RESUME.
        env.fake
            .dispatch_message_create(DM, None, USER, "while down", false, None);
        env.fake
            .wait_for("a RESUME", WAIT, |f| (f.resume_count() >= 1).then_some(()))
            .await;
        let sent = env.sent_settled(2).await;
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let sent_later = env.fake.sent_messages();
        assert_eq!(sent_later.len(), sent.len(), "nothing more arrives later");
        let got: Vec<&str> = sent.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(got, ["reply to: first", "reply to: while down"]);
        assert_eq!(env.fake.identify_count(), 1, "resumed, not re-identified");
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn rate_limit_and_server_error_then_success_give_one_copy() {
    bounded("429 then success", async {
        let env = start(|_| {}).await;
        let route = format!("/channels/{DM}/messages");
        env.fake.fail_next_rest(&route, Fault::ServerError);
        env.fake.fail_next_rest(
            &route,
            Fault::RateLimited {
                retry_after_secs: 0.3,
            },
        );
        env.fake
            .dispatch_message_create(DM, None, USER, "are you there", false, None);
        let sent = env.sent_settled(1).await;
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].content, "reply to: are you there");
        assert_eq!(
            posts_to(&env.fake, DM),
            3,
            "500, 429, then the one that landed"
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn missed_heartbeat_acks_end_in_a_new_session_that_still_answers() {
    bounded("missed acks", async {
        let fake = FakeDiscord::start(TOKEN).await;
        fake.set_heartbeat_interval(500);
        let env = start_on(fake, |_| {}).await;
        env.fake.stop_heartbeat_acks(true);
        env.fake
            .wait_for("a fresh IDENTIFY", Duration::from_secs(20), |f| {
                (f.identify_count() >= 2).then_some(())
            })
            .await;
        env.fake.stop_heartbeat_acks(false);
        env.fake.wait_ready(Duration::from_secs(20)).await;
        env.fake
            .dispatch_message_create(DM, None, USER, "still there?", false, None);
        let sent = env.sent_settled(1).await;
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].content, "reply to: still there?");
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn the_watchdog_restarts_a_shard_that_shows_no_sign_of_life() {
    bounded("watchdog", async {
        // With the fake's 45 s heartbeat interval serenity itself will not look for an ACK
        // within the test, so a shard silent for longer than the 2 s watchdog limit is what a
        // deaf one looks like from outside, and only the watchdog can notice it.
        let env = start(|c| c.discord.gateway_watchdog_secs = 2).await;
        env.fake
            .wait_for(
                "the watchdog's restart (a second IDENTIFY)",
                Duration::from_secs(20),
                |f| (f.identify_count() >= 2).then_some(()),
            )
            .await;
        env.fake.wait_ready(Duration::from_secs(20)).await;
        env.fake
            .dispatch_message_create(DM, None, USER, "after the restart", false, None);
        let sent = env.sent_settled(1).await;
        assert_eq!(sent[0].content, "reply to: after the restart");
        env.stop().await;
    })
    .await;
}

/// Issue 25: the gateway URL could not be read when the client started (a 500 from the
/// configured API). The adapter asks again on its next start, from the same `api_url`, and
/// connects to the gateway it names; serenity alone dialled its built-in host for good.
#[tokio::test]
async fn a_failed_gateway_lookup_at_start_is_asked_again_and_the_bot_answers() {
    bounded("gateway lookup fails once", async {
        let fake = FakeDiscord::start(TOKEN).await;
        fake.fail_next_rest("/gateway", Fault::ServerError);
        let env = start_on(fake, |c| {
            // One fixed shard: the lookup that fails is the client's own, not the shard count.
            c.discord.shards = herald::config::ShardCount::Fixed(1);
        })
        .await;
        let asked = env
            .fake
            .requests()
            .iter()
            .filter(|r| r.starts_with("GET /gateway"))
            .count();
        assert!(asked >= 2, "the gateway URL was asked for again: {asked}");
        env.fake
            .dispatch_message_create(DM, None, USER, "are you back", false, None);
        let sent = env.sent_settled(1).await;
        assert_eq!(sent[0].content, "reply to: are you back");
        env.stop().await;
    })
    .await;
}
