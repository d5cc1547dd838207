//! Proves the fake Discord in `test-support/src/fake_discord` against the real serenity 0.12.5
//! client, so adapter tests built on it test serenity's real behaviour and not the fake's.
//!
//! Each test starts its own fake and client. Every wait is bounded: a broken fake fails a test,
//! it never hangs the suite. These tests must not assert anything about Herald itself.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_test_support::fake_discord::{within, FakeDiscord, Fault, BOT_USER_ID};
use serenity::all::{
    ChannelId, ClientBuilder, Command, CommandDataOptionValue, CommandInteraction, Context,
    CreateAllowedMentions, CreateCommand, CreateInteractionResponse,
    CreateInteractionResponseFollowup, CreateInteractionResponseMessage, CreateMessage,
    EditInteractionResponse, EventHandler, GatewayIntents, Guild, GuildId, HttpBuilder,
    Interaction, Message, MessageId, Ready,
};
use serenity::http::{Http, HttpError};
use tokio::sync::mpsc;

const TOKEN: &str = "fake-token";
const WAIT: Duration = Duration::from_secs(10);
const GUILD: u64 = 500;
const CHANNEL: u64 = 600;
const THREAD: u64 = 601;
const USER: u64 = 42;

enum Seen {
    Ready(String),
    Message(Box<Message>),
    Command(Box<CommandInteraction>),
    Guild(Box<Guild>),
}

struct Forward(mpsc::UnboundedSender<Seen>);

#[serenity::async_trait]
impl EventHandler for Forward {
    async fn ready(&self, _: Context, ready: Ready) {
        let _ = self.0.send(Seen::Ready(ready.session_id));
    }
    async fn message(&self, _: Context, msg: Message) {
        let _ = self.0.send(Seen::Message(Box::new(msg)));
    }
    async fn interaction_create(&self, _: Context, interaction: Interaction) {
        if let Interaction::Command(cmd) = interaction {
            let _ = self.0.send(Seen::Command(Box::new(cmd)));
        }
    }
    async fn guild_create(&self, _: Context, guild: Guild, _: Option<bool>) {
        let _ = self.0.send(Seen::Guild(Box::new(guild)));
    }
}

struct Harness {
    fake: FakeDiscord,
    http: Arc<Http>,
    rx: mpsc::UnboundedReceiver<Seen>,
    client: tokio::task::JoinHandle<serenity::Result<()>>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.client.abort();
    }
}

fn fake_http(fake: &FakeDiscord, token: &str) -> Http {
    HttpBuilder::new(token)
        .proxy(fake.api_url())
        .ratelimiter_disabled(true)
        .build()
}

/// Starts a fake and a serenity client on it; waits for the handler's READY.
async fn start(heartbeat_ms: Option<u64>) -> Harness {
    let fake = FakeDiscord::start(TOKEN).await;
    if let Some(ms) = heartbeat_ms {
        fake.set_heartbeat_interval(ms);
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let intents = GatewayIntents::GUILDS
        | GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT;
    let mut client = ClientBuilder::new_with_http(fake_http(&fake, TOKEN), intents)
        .event_handler(Forward(tx))
        .await
        .expect("serenity client builds");
    let http = client.http.clone();
    let client = tokio::spawn(async move { client.start().await });
    let mut h = Harness {
        fake,
        http,
        rx,
        client,
    };
    let session = h.next("READY", |s| match s {
        Seen::Ready(id) => Some(id),
        _ => None,
    });
    assert!(session.await.starts_with("fake-session-"));
    h
}

impl Harness {
    /// The next event `pick` accepts; other events are skipped.
    async fn next<T>(&mut self, what: &str, mut pick: impl FnMut(Seen) -> Option<T>) -> T {
        let rx = &mut self.rx;
        within(what, WAIT, async {
            loop {
                let seen = rx.recv().await.expect("handler channel open");
                if let Some(v) = pick(seen) {
                    return v;
                }
            }
        })
        .await
    }

    /// The next MESSAGE_CREATE written by someone other than the bot.
    async fn next_user_message(&mut self) -> Message {
        self.next("a user message", |s| match s {
            Seen::Message(m) if m.author.id.get() != BOT_USER_ID => Some(*m),
            _ => None,
        })
        .await
    }
}

#[tokio::test]
async fn injected_message_reaches_handler_and_replies_are_recorded() {
    let mut h = start(None).await;
    assert_eq!(h.fake.identify_count(), 1);

    let mid = h
        .fake
        .dispatch_message_create(CHANNEL, Some(GUILD), USER, "hello bot", true, None);
    let m = h.next_user_message().await;
    assert_eq!(m.id.get(), mid);
    assert_eq!(m.channel_id.get(), CHANNEL);
    assert_eq!(m.guild_id.map(|g| g.get()), Some(GUILD));
    assert_eq!(m.author.id.get(), USER);
    assert_eq!(m.content, "hello bot");
    assert!(m.mentions_user_id(BOT_USER_ID));

    let channel = ChannelId::new(CHANNEL);
    let said = channel.say(&h.http, "plain answer").await.expect("say");
    let reply = CreateMessage::new()
        .content("a reply")
        .reference_message((channel, MessageId::new(mid)))
        .allowed_mentions(CreateAllowedMentions::new().replied_user(false));
    let replied = channel.send_message(&h.http, reply).await.expect("reply");
    channel.broadcast_typing(&h.http).await.expect("typing");

    let sent = h.fake.wait_for_sent(2, WAIT).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(
        (sent[0].channel_id, sent[0].content.as_str()),
        (CHANNEL, "plain answer")
    );
    assert_eq!(sent[0].message_id, said.id.get());
    assert_eq!(sent[0].reference, None);
    assert_eq!(sent[1].content, "a reply");
    assert_eq!(sent[1].reference, Some(mid));
    let mentions = sent[1]
        .allowed_mentions
        .clone()
        .expect("allowed_mentions sent");
    assert_eq!(mentions["replied_user"], false);
    // The answer carries the replied-to message, as Discord's does.
    assert_eq!(replied.referenced_message.map(|r| r.id.get()), Some(mid));
    assert_eq!(h.fake.typing_count(CHANNEL), 1);

    // Discord echoes the bot's own messages over the gateway; an adapter must ignore them.
    let echo = h
        .next("the bot's own message echoed", |s| match s {
            Seen::Message(m) if m.author.id.get() == BOT_USER_ID => Some(*m),
            _ => None,
        })
        .await;
    assert!(echo.author.bot);
    assert_eq!(echo.content, "plain answer");
    assert_eq!(h.fake.unknown_routes(), Vec::<String>::new());
}

#[tokio::test]
async fn rest_faults_reach_the_caller_without_retry_in_proxy_mode() {
    let h = start(None).await;
    let channel = ChannelId::new(CHANNEL);
    let route = format!("/channels/{CHANNEL}/messages");
    let posts = |f: &FakeDiscord| {
        let wanted = format!("POST {route}");
        f.requests().iter().filter(|r| **r == wanted).count()
    };

    h.fake.fail_next_rest(
        &route,
        Fault::RateLimited {
            retry_after_secs: 1.5,
        },
    );
    let err = channel
        .say(&h.http, "first try")
        .await
        .expect_err("429 surfaces");
    let serenity::Error::Http(HttpError::UnsuccessfulRequest(resp)) = err else {
        panic!("expected an unsuccessful request, got {err:?}");
    };
    assert_eq!(resp.status_code.as_u16(), 429);
    // Discord's 429 body has no `code`, so serenity cannot decode it: `retry_after` is lost
    // (code -1) and the headers are not kept either. An adapter must back off on the status.
    assert_eq!(resp.error.code, -1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(posts(&h.fake), 1, "serenity must not retry on its own");
    assert!(h.fake.sent_messages().is_empty());

    h.fake.fail_next_rest(&route, Fault::ServerError);
    let err = channel
        .say(&h.http, "second try")
        .await
        .expect_err("500 surfaces");
    let serenity::Error::Http(HttpError::UnsuccessfulRequest(resp)) = err else {
        panic!("expected an unsuccessful request, got {err:?}");
    };
    assert_eq!(resp.status_code.as_u16(), 500);
    assert_eq!(posts(&h.fake), 2);

    h.fake
        .fail_next_rest(&route, Fault::Delay(Duration::from_millis(300)));
    let started = Instant::now();
    channel
        .say(&h.http, "third try")
        .await
        .expect("delayed send succeeds");
    assert!(started.elapsed() >= Duration::from_millis(300));
    let sent = h.fake.sent_messages();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].content, "third try");

    let wrong = fake_http(&h.fake, "not-the-token");
    let err = wrong.get_current_user().await.expect_err("wrong token");
    let serenity::Error::Http(HttpError::UnsuccessfulRequest(resp)) = err else {
        panic!("expected an unsuccessful request, got {err:?}");
    };
    assert_eq!(resp.status_code.as_u16(), 401);
}

#[tokio::test]
async fn dropped_socket_resumes_and_replays_missed_events() {
    let mut h = start(None).await;
    h.fake.drop_socket();
    let missed =
        h.fake
            .dispatch_message_create(CHANNEL, None, USER, "sent while down", false, None);
    h.fake
        .wait_for("a RESUME", WAIT, |f| (f.resume_count() >= 1).then_some(()))
        .await;
    let m = h.next_user_message().await;
    assert_eq!(
        (m.id.get(), m.content.as_str()),
        (missed, "sent while down")
    );

    h.fake
        .dispatch_message_create(CHANNEL, None, USER, "after reconnect", false, None);
    // Next in order, so the replayed message was delivered exactly once.
    assert_eq!(h.next_user_message().await.content, "after reconnect");
    assert_eq!((h.fake.identify_count(), h.fake.resume_count()), (1, 1));

    // op 7 also ends in a RESUME.
    h.fake.send_reconnect();
    h.fake
        .wait_for("a second RESUME", WAIT, |f| {
            (f.resume_count() >= 2).then_some(())
        })
        .await;
    h.fake
        .dispatch_message_create(CHANNEL, None, USER, "after op 7", false, None);
    assert_eq!(h.next_user_message().await.content, "after op 7");
}

#[tokio::test]
async fn invalid_session_and_missing_acks_end_in_a_fresh_identify() {
    let mut h = start(Some(500)).await;
    h.fake.invalidate_session(false);
    // serenity restarts the shard through its queue, which spaces boots 5 s apart.
    h.fake
        .wait_for("a second IDENTIFY", Duration::from_secs(15), |f| {
            (f.identify_count() >= 2 && f.connected()).then_some(())
        })
        .await;
    h.fake
        .dispatch_message_create(CHANNEL, None, USER, "after op 9", false, None);
    assert_eq!(h.next_user_message().await.content, "after op 9");

    h.fake.stop_heartbeat_acks(true);
    h.fake
        .wait_for(
            "an IDENTIFY after missed acks",
            Duration::from_secs(20),
            |f| (f.identify_count() >= 3).then_some(()),
        )
        .await;
    h.fake.stop_heartbeat_acks(false);
    h.fake.wait_ready(WAIT).await;
    h.fake
        .dispatch_message_create(CHANNEL, None, USER, "after acks", false, None);
    assert_eq!(h.next_user_message().await.content, "after acks");
    assert_eq!(h.fake.resume_count(), 0);
}

#[tokio::test]
async fn slash_command_round_trip() {
    let mut h = start(None).await;
    Command::set_global_commands(
        &h.http,
        vec![CreateCommand::new("handoff").description("wrap up this conversation")],
    )
    .await
    .expect("global commands");
    GuildId::new(GUILD)
        .set_commands(
            &h.http,
            vec![CreateCommand::new("new").description("new session")],
        )
        .await
        .expect("guild commands");
    let registered = h.fake.registered_commands();
    let scopes: Vec<(Option<u64>, &str)> = registered
        .iter()
        .map(|c| (c.guild_id, c.name.as_str()))
        .collect();
    assert_eq!(scopes, vec![(None, "handoff"), (Some(GUILD), "new")]);

    let (iid, token) = h.fake.dispatch_interaction_create(
        CHANNEL,
        Some(GUILD),
        USER,
        "handoff",
        &[("note", "soon")],
    );
    let cmd = h
        .next("a slash command", |s| match s {
            Seen::Command(c) => Some(*c),
            _ => None,
        })
        .await;
    assert_eq!((cmd.id.get(), cmd.data.name.as_str()), (iid, "handoff"));
    assert_eq!(cmd.user.id.get(), USER);
    assert_eq!(cmd.guild_id.map(|g| g.get()), Some(GUILD));
    assert_eq!(
        cmd.data.options[0].value,
        CommandDataOptionValue::String("soon".into())
    );

    let defer = CreateInteractionResponse::Defer(CreateInteractionResponseMessage::new());
    cmd.create_response(&h.http, defer).await.expect("defer");
    let followup = CreateInteractionResponseFollowup::new().content("capsule queued");
    cmd.create_followup(&h.http, followup)
        .await
        .expect("followup");
    let edit = EditInteractionResponse::new().content("done");
    cmd.edit_response(&h.http, edit)
        .await
        .expect("edit original");

    let callbacks = h.fake.interaction_callbacks();
    assert_eq!(callbacks.len(), 1);
    assert_eq!((callbacks[0].interaction_id, callbacks[0].kind), (iid, 5));
    let followups: Vec<(String, Option<String>, String)> = h
        .fake
        .followups()
        .into_iter()
        .map(|f| {
            (
                f.method,
                f.target,
                f.body["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        followups,
        vec![
            ("POST".into(), None, "capsule queued".into()),
            ("PATCH".into(), Some("@original".into()), "done".into()),
        ]
    );
    assert!(h.fake.followups().iter().all(|f| f.token == token));

    // In a DM the user comes as `user`, not `member`.
    h.fake
        .dispatch_interaction_create(CHANNEL, None, USER, "handoff", &[]);
    let dm = h
        .next("a DM slash command", |s| match s {
            Seen::Command(c) => Some(*c),
            _ => None,
        })
        .await;
    assert_eq!((dm.user.id.get(), dm.guild_id), (USER, None));
}

#[tokio::test]
async fn guild_create_carries_threads_with_their_parent() {
    let mut h = start(None).await;
    h.fake.guild_create(
        GUILD,
        &[(CHANNEL, "general")],
        &[(THREAD, "topic", CHANNEL)],
    );
    let guild = h
        .next("GUILD_CREATE", |s| match s {
            Seen::Guild(g) => Some(*g),
            _ => None,
        })
        .await;
    assert_eq!(guild.id.get(), GUILD);
    assert!(guild.channels.contains_key(&ChannelId::new(CHANNEL)));
    let thread = guild.threads.first().expect("one thread");
    assert_eq!(thread.id.get(), THREAD);
    assert_eq!(thread.parent_id.map(|p| p.get()), Some(CHANNEL));

    let fetched = h
        .http
        .get_channel(ChannelId::new(THREAD))
        .await
        .expect("GET /channels/{thread}");
    let fetched = fetched.guild().expect("a guild channel");
    assert_eq!(fetched.parent_id.map(|p| p.get()), Some(CHANNEL));

    h.fake
        .dispatch_message_create(THREAD, Some(GUILD), USER, "in a thread", false, None);
    let m = h.next_user_message().await;
    assert_eq!(
        (m.channel_id.get(), m.content.as_str()),
        (THREAD, "in a thread")
    );
}

#[tokio::test]
async fn attachments_and_stickers_parse_and_the_cdn_serves_them() {
    let mut h = start(None).await;
    let file = h
        .fake
        .add_cdn_file("notes.txt", "text/plain", b"hello file");
    let mid = h.fake.dispatch_message_with_files(
        CHANNEL,
        Some(GUILD),
        USER,
        "see attached",
        std::slice::from_ref(&file),
        &[(7493, "wave")],
    );
    let m = h.next_user_message().await;
    assert_eq!(m.id.get(), mid);
    let [a] = m.attachments.as_slice() else {
        panic!("{:?}", m.attachments)
    };
    assert_eq!(
        (a.filename.as_str(), a.content_type.as_deref(), a.size),
        ("notes.txt", Some("text/plain"), 10)
    );
    assert_eq!(m.sticker_items.len(), 1);
    assert_eq!(
        (
            m.sticker_items[0].id.get(),
            m.sticker_items[0].name.as_str()
        ),
        (7493, "wave")
    );
    // The CDN needs no token.
    herald_test_support::harness::init();
    let body = reqwest::get(&a.url)
        .await
        .expect("cdn")
        .bytes()
        .await
        .unwrap();
    assert_eq!(&body[..], b"hello file");
    assert_eq!(h.fake.cdn_downloads(file.id), 1);
}
