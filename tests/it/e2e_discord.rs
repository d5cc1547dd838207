//! End to end through the Discord adapter: the real serenity client against the fake Discord in
//! `test-support/src/fake_discord`, the real core (`App::start`) against the fake model, SQLite.
//!
//! Each test starts its own fake, model and daemon, and runs under a time bound, so a broken
//! adapter fails a test instead of hanging the suite. Assertions are on what a Discord user
//! would see: the messages the bot posted (as recorded by the fake), in order, once.

mod approvals;
mod faults;
mod user;

use std::future::Future;
use std::time::Duration;

use herald::adapters::split::{split_message, Measure, DISCORD_LIMIT};
use herald::app::App;
use herald::config::{Config, Secret};
use herald_test_support::fake_discord::{within, FakeDiscord, SentMessage, BOT_USER_ID};
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, Client};
use serde_json::Value;

const TOKEN: &str = "fake-token";
const WAIT: Duration = Duration::from_secs(15);
const USER: u64 = 42;
const STRANGER: u64 = 77;
const DM: u64 = 900;
const GUILD: u64 = 500;
const CHANNEL: u64 = 600;
const THREAD: u64 = 601;

struct Env {
    fake: FakeDiscord,
    llm: FakeLlm,
    app: Option<App>,
    _data: tempfile::TempDir,
}

impl Env {
    fn app(&self) -> &App {
        self.app.as_ref().expect("app running")
    }

    async fn stop(mut self) {
        if let Some(app) = self.app.take() {
            app.shutdown().await;
        }
    }

    /// Messages the bot posted, once the fake has recorded `n`, after a pause long enough for a
    /// duplicate to show up.
    async fn sent_settled(&self, n: usize) -> Vec<SentMessage> {
        self.fake.wait_for_sent(n, WAIT).await;
        tokio::time::sleep(Duration::from_millis(700)).await;
        self.fake.sent_messages()
    }

    fn user_texts(&self) -> Vec<String> {
        self.llm.requests().iter().map(|r| r.last_user()).collect()
    }
}

/// Fake Discord with a guild (a channel and a thread under it), fake model, running daemon
/// connected to the gateway.
async fn start(tune: impl FnOnce(&mut Config)) -> Env {
    start_on(FakeDiscord::start(TOKEN).await, tune).await
}

async fn start_on(fake: FakeDiscord, tune: impl FnOnce(&mut Config)) -> Env {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().expect("temp dir");
    let mut c = test_config(&llm, &data);
    c.discord.token = Some(Secret::new(TOKEN));
    c.discord.api_url = fake.api_url().parse().unwrap();
    // serenity's ratelimiter ignores the proxy (see the fake's header).
    c.discord.ratelimiter = false;
    c.discord.allowed_users = vec![USER.to_string()];
    c.discord.rate_limit_wait_ms = 300;
    tune(&mut c);
    let app = App::start(c).await.expect("herald starts");
    fake.wait_ready(WAIT).await;
    fake.guild_create(
        GUILD,
        &[(CHANNEL, "general")],
        &[(THREAD, "topic", CHANNEL)],
    );
    Env {
        fake,
        llm,
        app: Some(app),
        _data: data,
    }
}

async fn bounded(what: &str, test: impl Future<Output = ()>) {
    within(what, Duration::from_secs(60), test).await;
}

fn posts_to(fake: &FakeDiscord, channel: u64) -> usize {
    let wanted = format!("POST /channels/{channel}/messages");
    fake.requests().iter().filter(|r| **r == wanted).count()
}

/// No `@everyone`/`@here`, no roles, no users named in the text: at most the replied-to author.
fn assert_mentions_neutralized(m: &SentMessage, replied_user: bool) {
    let am: Value = m.allowed_mentions.clone().expect("allowed_mentions sent");
    let parse = am["parse"].as_array().cloned().unwrap_or_default();
    assert!(parse.is_empty(), "nothing parsed from the text: {am}");
    assert_eq!(am["users"], serde_json::json!([]), "{am}");
    assert_eq!(am["roles"], serde_json::json!([]), "{am}");
    assert_eq!(am["replied_user"], replied_user, "{am}");
}

#[tokio::test]
async fn dm_round_trip() {
    bounded("dm round trip", async {
        let env = start(|_| {}).await;
        let mid = env
            .fake
            .dispatch_message_create(DM, None, USER, "hello there", false, None);
        let sent = env.sent_settled(1).await;
        assert_eq!(sent.len(), 1, "one answer, and our own echo starts no turn");
        assert_eq!(
            (sent[0].channel_id, sent[0].content.as_str()),
            (DM, "reply to: hello there")
        );
        assert_eq!(
            sent[0].reference,
            Some(mid),
            "the answer replies to the question"
        );
        assert_mentions_neutralized(&sent[0], true);
        assert!(
            env.fake.typing_count(DM) >= 1,
            "typing shown while the turn ran"
        );
        assert_eq!(env.llm.request_count(), 1);
        let rows = env.app().store.outbox_recent(10).await.expect("outbox");
        assert_eq!(rows.len(), 1);
        assert_eq!(
            rows[0].platform_message_id,
            Some(sent[0].message_id.to_string()),
            "the Discord message id is stored on the outbox row"
        );
        assert_eq!(env.fake.unknown_routes(), Vec::<String>::new());
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn guild_channel_answers_only_when_addressed() {
    bounded("guild channel", async {
        let env = start(|_| {}).await;
        env.fake
            .dispatch_message_create(CHANNEL, Some(GUILD), USER, "just chatting", false, None);
        let mid = env.fake.dispatch_message_create(
            CHANNEL,
            Some(GUILD),
            USER,
            &format!("<@{BOT_USER_ID}> what time is it"),
            true,
            None,
        );
        let sent = env.sent_settled(1).await;
        assert_eq!(sent.len(), 1);
        assert_eq!(
            (
                sent[0].channel_id,
                sent[0].content.as_str(),
                sent[0].reference
            ),
            (CHANNEL, "reply to: what time is it", Some(mid))
        );
        // Replying to the bot's message is addressing it, mention or not.
        env.fake.dispatch_message_create(
            CHANNEL,
            Some(GUILD),
            USER,
            "and tomorrow?",
            false,
            Some(sent[0].message_id),
        );
        let sent = env.sent_settled(2).await;
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[1].content, "reply to: and tomorrow?");
        assert_eq!(
            env.user_texts(),
            ["what time is it", "and tomorrow?"],
            "unaddressed chatter never reaches the model"
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn free_response_channel_needs_no_mention() {
    bounded("free-response channel", async {
        let env = start(|c| c.discord.free_response_channels = vec![CHANNEL.to_string()]).await;
        env.fake
            .dispatch_message_create(CHANNEL, Some(GUILD), USER, "anyone here", false, None);
        let sent = env.sent_settled(1).await;
        assert_eq!(
            (sent.len(), sent[0].content.as_str()),
            (1, "reply to: anyone here")
        );
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_thread_is_its_own_lane() {
    bounded("thread lane", async {
        let env = start(|_| {}).await;
        let mention = format!("<@{BOT_USER_ID}>");
        env.fake.dispatch_message_create(
            CHANNEL,
            Some(GUILD),
            USER,
            &format!("{mention} in the channel"),
            true,
            None,
        );
        env.fake.wait_for_sent(1, WAIT).await;
        env.fake.dispatch_message_create(
            THREAD,
            Some(GUILD),
            USER,
            &format!("{mention} in the thread"),
            true,
            None,
        );
        let sent = env.sent_settled(2).await;
        assert_eq!(sent.len(), 2);
        assert_eq!(
            (sent[1].channel_id, sent[1].content.as_str()),
            (THREAD, "reply to: in the thread"),
            "a reply in a thread stays in it"
        );
        let client = Client::new(env.app());
        let thread = client.transcript("discord:600:601").await;
        let channel = client.transcript("discord:600").await;
        assert_eq!(thread[0], ("user".into(), "in the thread".into()));
        assert_eq!(channel[0], ("user".into(), "in the channel".into()));
        assert_eq!((thread.len(), channel.len()), (2, 2), "separate sessions");
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_long_answer_arrives_split_in_order() {
    bounded("long answer", async {
        let env = start(|_| {}).await;
        let mut long = String::from("Here is the plan.\n\n");
        for i in 0..40 {
            long.push_str(&format!(
                "Paragraph {i}: {}\n\n",
                "words and more words ".repeat(5)
            ));
        }
        long.push_str("```rust\n");
        for i in 0..60 {
            long.push_str(&format!(
                "let value_{i} = compute_something({i}); // step é\n"
            ));
        }
        long.push_str("```\n\nThat is all.");
        assert!(long.chars().count() >= 7_000, "{}", long.chars().count());
        env.llm.push(Step::Reply(long.clone()));
        let mid = env
            .fake
            .dispatch_message_create(DM, None, USER, "the plan please", false, None);
        let want = split_message(&long, DISCORD_LIMIT, Measure::Chars);
        assert!(want.len() >= 4);
        let sent = env.sent_settled(want.len()).await;
        let got: Vec<&str> = sent.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(got, want, "every chunk once, in order");
        for m in &sent {
            assert!(m.content.chars().count() <= DISCORD_LIMIT);
            assert_eq!(m.content.matches("```").count() % 2, 0, "fences balanced");
        }
        let refs: Vec<Option<u64>> = sent.iter().map(|m| m.reference).collect();
        assert_eq!(refs[0], Some(mid), "only the first chunk is a reply");
        assert!(refs[1..].iter().all(Option::is_none));
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn slash_command_is_deferred_then_acknowledged() {
    bounded("slash command", async {
        let env = start(|_| {}).await;
        let names = env
            .fake
            .wait_for("slash commands registered", WAIT, |f| {
                let mut n: Vec<String> = f
                    .registered_commands()
                    .into_iter()
                    .map(|c| c.name)
                    .collect();
                n.sort();
                (n.len() >= 4).then_some(n)
            })
            .await;
        assert_eq!(names, ["new", "status", "stop", "usage", "wrapup"]);
        env.fake
            .dispatch_message_create(DM, None, USER, "start a session", false, None);
        env.fake.wait_for_sent(1, WAIT).await;
        let (iid, token) = env
            .fake
            .dispatch_interaction_create(DM, None, USER, "new", &[]);
        let cb = env
            .fake
            .wait_for("the deferral", WAIT, |f| {
                f.interaction_callbacks()
                    .into_iter()
                    .find(|c| c.interaction_id == iid)
            })
            .await;
        assert_eq!(cb.kind, 5, "deferred channel message");
        let ack = env
            .fake
            .wait_for("the follow-up", WAIT, |f| {
                f.followups().into_iter().find(|x| x.token == token)
            })
            .await;
        // One answer: the deferred response edited into the command's own reply, no
        // acknowledgement before it and no channel message after it.
        assert_eq!(ack.method, "PATCH");
        assert_eq!(ack.target.as_deref(), Some("@original"));
        assert_eq!(
            ack.body["content"],
            "Started a new session. Earlier messages stay searchable."
        );
        let sent = env.sent_settled(1).await;
        assert_eq!(sent.len(), 1, "{sent:?}");
        let answers = env
            .fake
            .followups()
            .into_iter()
            .filter(|x| x.token == token)
            .count();
        assert_eq!(answers, 1);
        assert_eq!(env.llm.request_count(), 1, "the command cost no model call");
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn everyone_in_model_output_does_not_ping() {
    bounded("mentions", async {
        let env = start(|_| {}).await;
        env.llm
            .push(Step::Reply("@everyone look, <@&777> and <@55> too".into()));
        env.fake.dispatch_message_create(
            CHANNEL,
            Some(GUILD),
            USER,
            &format!("<@{BOT_USER_ID}> ping them"),
            true,
            None,
        );
        let sent = env.sent_settled(1).await;
        assert_eq!(sent[0].content, "@everyone look, <@&777> and <@55> too");
        assert_mentions_neutralized(&sent[0], true);
        env.stop().await;
    })
    .await;
}

#[tokio::test]
async fn unauthorized_user_costs_no_model_call() {
    bounded("unauthorized", async {
        let env = start(|_| {}).await;
        env.fake
            .dispatch_message_create(DM + 1, None, STRANGER, "let me in", false, None);
        env.fake
            .dispatch_message_create(DM, None, USER, "hello", false, None);
        // The stranger's only answer is a pairing code (private chat); no model call.
        let sent = env.sent_settled(2).await;
        assert_eq!(sent.len(), 2);
        let to_user: Vec<_> = sent.iter().filter(|m| m.channel_id == DM).collect();
        assert_eq!(to_user.len(), 1);
        assert_eq!(to_user[0].content, "reply to: hello");
        let to_stranger: Vec<_> = sent.iter().filter(|m| m.channel_id == DM + 1).collect();
        assert_eq!(to_stranger.len(), 1);
        assert!(
            to_stranger[0].content.contains("pairing code"),
            "{}",
            to_stranger[0].content
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(env.user_texts(), ["hello"]);
        assert_eq!(posts_to(&env.fake, DM + 1), 1);
        env.stop().await;
    })
    .await;
}
