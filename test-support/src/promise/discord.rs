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

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::super::fake_discord::{payloads, FakeDiscord};
use super::census::Kill;
use super::load::{Answer, Channel, UNRESOLVED};
use super::receipts::Receipts;

pub const TOKEN: &str = "promise-discord-token";
/// DM channels (and their users) start here; lane `i` is channel `FIRST_CHANNEL + i`.
const FIRST_CHANNEL: u64 = 7000;
const FIRST_USER: u64 = 17000;
/// How long one delivery attempt waits for the reply before the client looks again.
const ATTEMPT_WAIT: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct DiscordChannel {
    fake: Arc<FakeDiscord>,
    /// client id → (channel, message id) of the message dispatched for it.
    pushed: Arc<Mutex<HashMap<String, (u64, u64)>>>,
    next_id: Arc<AtomicU64>,
    /// MESSAGE_CREATEs dispatched, first ones and replays.
    dispatches: Arc<AtomicUsize>,
    /// The instant and epoch-ms of the start, to place the fake's send instants against kills.
    epoch: (Instant, i64),
}

impl DiscordChannel {
    pub async fn start() -> DiscordChannel {
        DiscordChannel {
            fake: Arc::new(FakeDiscord::start(TOKEN).await),
            pushed: Arc::default(),
            // Far above the fake's own ids, so the two never meet.
            next_id: Arc::new(AtomicU64::new(1 << 60)),
            dispatches: Arc::default(),
            epoch: (Instant::now(), chrono::Utc::now().timestamp_millis()),
        }
    }

    /// Settings for a daemon connected to this fake.
    pub fn daemon_env(&self) -> Vec<(String, String)> {
        [
            ("HERALD_DISCORD__TOKEN", TOKEN.to_string()),
            ("HERALD_DISCORD__API_URL", self.fake.api_url()),
            // serenity's ratelimiter ignores the proxy (see the fake's header).
            ("HERALD_DISCORD__RATELIMITER", "false".into()),
            ("HERALD_DISCORD__ALLOW_ALL_USERS", "true".into()),
            ("HERALD_PAIRING__ENABLED", "false".into()),
            // The receipts count one sent message per answer: unstreamed.
            ("HERALD_STREAMING__ENABLED", "false".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
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
        let mut pushed = self.pushed.lock().unwrap_or_else(|e| e.into_inner());
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
        let pushed = self.pushed.lock().unwrap_or_else(|e| e.into_inner()).len();
        self.dispatches
            .load(Ordering::Relaxed)
            .saturating_sub(pushed)
    }

    /// Counts what the people saw: replies per message, resends and where they fell.
    pub fn receipts(&self, kills: &[Kill]) -> Receipts {
        let pushed: Vec<(u64, u64)> = self
            .pushed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .copied()
            .collect();
        let (at, ms) = self.epoch;
        let sends: Vec<(Option<(u64, u64)>, i64)> = self
            .fake
            .sent_with_times()
            .into_iter()
            .map(|(m, t)| {
                let stamp = ms + t.saturating_duration_since(at).as_millis() as i64;
                (m.reference.map(|r| (m.channel_id, r)), stamp)
            })
            .collect();
        Receipts::count(&pushed, &sends, kills)
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
        let pushed = self.pushed.lock().unwrap_or_else(|e| e.into_inner());
        match pushed.get(client_id) {
            Some((_, message)) => message.to_string(),
            None => client_id.to_string(),
        }
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
            let deadline = tokio::time::Instant::now() + ATTEMPT_WAIT;
            loop {
                if let Some(m) = reply() {
                    return Ok(Answer {
                        inbox_id: UNRESOLVED,
                        status: String::new(),
                        reply: m.content,
                    });
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(format!("no reply yet to {channel}:{id}"));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}
