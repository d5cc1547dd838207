//! The Discord way in for the promise runs: each lane is a DM channel of the fake Discord,
//! each message a MESSAGE_CREATE on its gateway, and the answer whatever the fake recorded
//! from `POST /channels/{id}/messages` replying to it — the people's view, independent of
//! the store the census reads.
//!
//! Discord has no redelivery: a message the gateway handed to a process that died before its
//! inbox write is gone, and a fresh process IDENTIFYs rather than RESUMEs, so it gets no
//! replay either. The channel stands in for the replay a resumed session would get: a message
//! still unanswered when an attempt gives up is dispatched again with its own message id
//! (and only while a daemon's socket is connected, as a dispatch to no one is lost). So what
//! is under test is the inbox's dedupe on Discord's message id and the outbox's exactly-once,
//! not the gateway's delivery, which Discord does not promise.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::super::fake_discord::{payloads, FakeDiscord, SentMessage};
use super::attempt::{await_reply, daemon_env, Pushed};
use super::census::Kill;
use super::load::{Answer, Channel};
use super::receipts::Receipts;
use super::stamps::Clock;

pub const TOKEN: &str = "promise-discord-token";
/// DM channels (and their users) start here; lane `i` is channel `FIRST_CHANNEL + i`.
const FIRST_CHANNEL: u64 = 7000;
const FIRST_USER: u64 = 17000;

#[derive(Clone)]
pub struct DiscordChannel {
    fake: Arc<FakeDiscord>,
    /// client id → (channel, message id) of the message dispatched for it.
    pushed: Pushed<(u64, u64)>,
    next_id: Arc<AtomicU64>,
    /// MESSAGE_CREATEs dispatched, first ones and replays.
    dispatches: Arc<AtomicUsize>,
    /// The start, to place the fake's send instants against kills.
    clock: Clock,
}

impl DiscordChannel {
    pub async fn start() -> DiscordChannel {
        DiscordChannel {
            fake: Arc::new(FakeDiscord::start(TOKEN).await),
            pushed: Pushed::default(),
            // Far above the fake's own ids, so the two never meet.
            next_id: Arc::new(AtomicU64::new(1 << 60)),
            dispatches: Arc::default(),
            clock: Clock::now(),
        }
    }

    /// Settings for a daemon connected to this fake.
    pub fn daemon_env(&self) -> Vec<(String, String)> {
        daemon_env(vec![
            ("HERALD_DISCORD__TOKEN", TOKEN.to_string()),
            ("HERALD_DISCORD__API_URL", self.fake.api_url()),
            // serenity's ratelimiter ignores the proxy (see the fake's header).
            ("HERALD_DISCORD__RATELIMITER", "false".into()),
            ("HERALD_DISCORD__ALLOW_ALL_USERS", "true".into()),
        ])
    }

    pub fn fake(&self) -> &FakeDiscord {
        &self.fake
    }

    /// The (channel, message id) for `client_id`, given out once.
    fn ids(&self, lane: &str, client_id: &str) -> Result<(u64, u64), String> {
        let channel: u64 = lane
            .strip_prefix("discord:")
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("not a DM lane: {lane}"))?;
        let mut pushed = self.pushed.lock();
        let next = || (channel, self.next_id.fetch_add(1, Ordering::Relaxed));
        Ok(*pushed.entry(client_id.to_string()).or_insert_with(next))
    }

    fn dispatch(&self, (channel, id): (u64, u64), text: &str) {
        let author = FIRST_USER + (channel - FIRST_CHANNEL);
        let msg = payloads::message(payloads::MessageParts {
            id,
            channel_id: channel,
            guild_id: None,
            author_id: author,
            content: text,
            mentions: vec![],
            reference: None,
        });
        self.fake.dispatch("MESSAGE_CREATE", msg);
        self.dispatches.fetch_add(1, Ordering::Relaxed);
    }

    /// Dispatches beyond the first of each message: the replays this channel stood in for.
    pub fn replays(&self) -> usize {
        let pushed = self.pushed.lock().len();
        self.dispatches
            .load(Ordering::Relaxed)
            .saturating_sub(pushed)
    }

    /// Counts what the people saw: replies per message, resends and where they fell.
    pub fn receipts(&self, kills: &[Kill]) -> Receipts {
        let quotes = |m: &SentMessage| m.reference.map(|r| (m.channel_id, r));
        let sent = self.fake.sent_with_times();
        self.clock.receipts(&self.pushed.all(), sent, quotes, kills)
    }
}

impl Channel for DiscordChannel {
    fn platform(&self) -> &'static str {
        "discord"
    }

    fn lane(&self, _prefix: &str, index: usize) -> String {
        format!("discord:{}", FIRST_CHANNEL + index as u64)
    }

    fn platform_id(&self, client_id: &str) -> String {
        self.pushed
            .platform_id(client_id, |(_, message)| message.to_string())
    }

    fn deliver(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> impl Future<Output = Result<Answer, String>> + Send {
        let ids = self.ids(lane, client_id);
        let (me, text) = (self.clone(), text.to_string());
        async move {
            let (channel, id) = ids?;
            let reply = || {
                me.fake
                    .sent_messages()
                    .into_iter()
                    .find(|m| m.channel_id == channel && m.reference == Some(id))
            };
            if reply().is_none() {
                if !me.fake.connected() {
                    return Err("no daemon on the gateway".into());
                }
                me.dispatch((channel, id), &text);
            }
            await_reply(format!("{channel}:{id}"), || reply().map(|m| m.content)).await
        }
    }
}
