//! A fake Discord (REST API + gateway websocket) on 127.0.0.1 for end-to-end tests, proven
//! against the real serenity 0.12.5 client in `tests/it/fake_discord_selftest.rs`.
//!
//! It exists so adapter tests run the real serenity code paths (HTTP, shard runner, event
//! parsing) with no network. It must not be smarter than Discord: it keeps Discord's wire shapes,
//! status codes and sequence rules, and records what the bot did so tests assert on that.
//!
//! How serenity is redirected, and the honest limits of that:
//! - REST: `HttpBuilder::new(token).proxy(fake.api_url()).ratelimiter_disabled(true)`. serenity's
//!   proxy is a string replace of `https://discord.com`, and its ratelimiter path ignores the
//!   proxy, so with the ratelimiter on, requests would escape to discord.com. Tests therefore run
//!   serenity without its ratelimiter; a 429 or 500 from this fake reaches the caller as
//!   `HttpError::UnsuccessfulRequest` with no retry (checked in the self-test), so retry policy
//!   in that mode is the adapter's job. Discord's 429 body has no `code`, so serenity cannot
//!   decode it: the caller sees status 429 with `error.code == -1`, and neither `retry_after`
//!   nor the `Retry-After` header survives into the error.
//! - Gateway: serenity takes the websocket URL from `GET /gateway` (or `/gateway/bot` when
//!   autosharding), so `gateway_url()` is only informative. If that request fails (wrong
//!   token, queued fault), serenity falls back to `wss://gateway.discord.gg`: never fault
//!   `/gateway` while a client starts. Plain `ws://` text frames are used
//!   although IDENTIFY asks for `compress`.
//! - serenity ignores `resume_gateway_url` and resumes on the URL it got from `/gateway`; it sends
//!   RESUME before reading HELLO. Both are accepted here.
//!
//! Deliberate differences from Discord, to keep tests deterministic:
//! - Dispatches injected while no session exists (before the first READY, or after an
//!   INVALID_SESSION(false)) are held and delivered right after the next READY; Discord would
//!   drop them. Events dispatched while a session exists but no socket is connected (after
//!   `drop_socket`) are replayed on RESUME, as Discord does, and lost on a fresh IDENTIFY.
//! - Messages the bot sends over REST are echoed as MESSAGE_CREATE (as Discord does) unless
//!   `set_echo_own_messages(false)`.
//! - Sharding: each IDENTIFY's `shard: [id, total]` opens a session for that shard, and a
//!   guild's events go only to shard `(guild_id >> 22) % total` (DMs to shard 0), as Discord
//!   routes them. One session per shard: an IDENTIFY for a shard whose socket is live cuts the
//!   old socket and is counted (`shard_takeovers`), where Discord would keep both sessions and
//!   deliver every event twice. GUILD_CREATE is not re-sent after an IDENTIFY.

mod cdn;
mod gateway;
pub use gateway::shard_of;
pub mod payloads;
mod records;
mod rest;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub use cdn::CdnFile;
pub use payloads::BOT_USER_ID;

/// Discord's epoch (2015-01-01) in Unix milliseconds; ids are real-looking snowflakes.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// A fault the next matching REST request meets instead of (or before) its normal answer.
#[derive(Clone, Debug)]
pub enum Fault {
    /// 429 with Discord's body and `Retry-After` / `X-RateLimit-*` headers.
    RateLimited { retry_after_secs: f64 },
    /// 500 with a Discord-style error body.
    ServerError,
    /// Answer normally after this delay.
    Delay(Duration),
}

/// A message the bot posted with `POST /channels/{id}/messages`.
#[derive(Clone, Debug)]
pub struct SentMessage {
    pub channel_id: u64,
    pub content: String,
    pub message_id: u64,
    pub allowed_mentions: Option<Value>,
    /// `message_reference.message_id`, when the bot replied to a message.
    pub reference: Option<u64>,
    /// The whole request body, for embeds, components, flags.
    pub body: Value,
    /// Files uploaded with the message (multipart parts with a file name), in order.
    pub files: Vec<crate::multipart::FilePart>,
}

/// One message edit (`PATCH /channels/{c}/messages/{m}`) the fake accepted.
#[derive(Clone, Debug)]
pub struct EditedMessage {
    pub channel_id: u64,
    pub message_id: u64,
    pub content: String,
    pub at: std::time::Instant,
    /// The whole request body (components, flags).
    pub body: Value,
}

#[derive(Clone, Debug)]
pub struct InteractionCallback {
    pub interaction_id: u64,
    pub token: String,
    /// 4 = message, 5 = deferred message, 6 = deferred update, …
    pub kind: u64,
    pub data: Option<Value>,
}

/// A request to the interaction webhook: a followup (`target == None`), or an edit/delete of
/// `@original` or of a followup id.
#[derive(Clone, Debug)]
pub struct Followup {
    pub token: String,
    pub method: String,
    pub target: Option<String>,
    pub body: Value,
    pub message_id: u64,
}

#[derive(Clone, Debug)]
pub struct RegisteredCommand {
    pub guild_id: Option<u64>,
    pub name: String,
    pub id: u64,
    pub body: Value,
}

pub(crate) enum ConnCmd {
    Frame(String),
    Drop,
}

pub(crate) struct Conn {
    pub id: u64,
    pub tx: mpsc::UnboundedSender<ConnCmd>,
}

pub(crate) struct Session {
    pub id: String,
    pub seq: u64,
    /// Every dispatch frame of the session, for RESUME replay.
    pub log: Vec<(u64, String)>,
}

#[derive(Default)]
pub(crate) struct Inner {
    pub sent: Vec<SentMessage>,
    /// When each of `sent` was recorded.
    pub sent_at: Vec<std::time::Instant>,
    pub edits: Vec<EditedMessage>,
    /// Message ids removed with `DELETE /channels/{c}/messages/{m}`.
    pub deleted: Vec<u64>,
    pub callbacks: Vec<InteractionCallback>,
    pub followups: Vec<Followup>,
    pub commands: Vec<RegisteredCommand>,
    pub typing: HashMap<u64, usize>,
    pub faults: Vec<(String, Fault)>,
    pub unknown_routes: Vec<String>,
    pub requests: Vec<String>,
    pub interaction_channels: HashMap<String, u64>,
    pub identify_count: usize,
    pub resume_count: usize,
    pub acks_stopped: bool,
    /// The shard count of the latest IDENTIFY (1 before any): what guild events route by.
    pub shard_total: u64,
    /// The current session of each shard.
    pub sessions: BTreeMap<u64, Session>,
    /// The socket that identified or resumed each shard's session.
    pub conns: BTreeMap<u64, Conn>,
    pub identifies_by_shard: BTreeMap<u64, usize>,
    /// IDENTIFYs that cut a live socket of the same shard.
    pub shard_takeovers: usize,
    pub pending: Vec<(String, Value)>,
    pub messages: HashMap<u64, Value>,
    pub channels: HashMap<u64, Value>,
    pub channel_guild: HashMap<u64, u64>,
}

pub(crate) struct Shared {
    pub token: String,
    pub gateway_url: String,
    pub heartbeat_interval_ms: AtomicU64,
    pub echo_own_messages: std::sync::atomic::AtomicBool,
    pub recommended_shards: AtomicU64,
    next_id: AtomicU64,
    inner: Mutex<Inner>,
    /// Files on the fake CDN, by attachment id.
    cdn: Mutex<HashMap<u64, cdn::Stored>>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread must not hide the records from the next assertion.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn token_ok(&self, presented: &str) -> bool {
        presented.strip_prefix("Bot ").unwrap_or(presented) == self.token
    }

    /// Appends a dispatch to the session of the shard it belongs to and sends it on that
    /// shard's live socket, under one lock so sequence numbers and wire order always agree.
    pub fn dispatch_locked(&self, inner: &mut Inner, event: &str, d: Value) {
        let shard = shard_of(event, &d, inner.shard_total);
        if inner.sessions.contains_key(&shard) {
            inner.send_on_shard(shard, event, d);
        } else {
            inner.pending.push((event.to_string(), d));
        }
    }
}

pub struct FakeDiscord {
    shared: Arc<Shared>,
    api_url: String,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for FakeDiscord {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl FakeDiscord {
    /// Starts REST and gateway listeners on 127.0.0.1 with free ports.
    pub async fn start(token: &str) -> FakeDiscord {
        let rest = TcpListener::bind("127.0.0.1:0").await.expect("bind rest");
        let ws = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind gateway");
        let rest_addr: SocketAddr = rest.local_addr().expect("rest addr");
        let ws_addr: SocketAddr = ws.local_addr().expect("gateway addr");
        let now_ms = chrono::Utc::now().timestamp_millis() as u64;
        let shared = Arc::new(Shared {
            token: token.strip_prefix("Bot ").unwrap_or(token).to_string(),
            gateway_url: format!("ws://{ws_addr}"),
            heartbeat_interval_ms: AtomicU64::new(45_000),
            echo_own_messages: std::sync::atomic::AtomicBool::new(true),
            recommended_shards: AtomicU64::new(1),
            next_id: AtomicU64::new((now_ms - DISCORD_EPOCH_MS) << 22),
            inner: Mutex::new(Inner {
                shard_total: 1,
                ..Inner::default()
            }),
            cdn: Mutex::default(),
        });
        let tasks = vec![
            tokio::spawn(rest::serve(rest, shared.clone())),
            tokio::spawn(gateway::serve(ws, shared.clone())),
        ];
        FakeDiscord {
            shared,
            api_url: format!("http://{rest_addr}"),
            tasks,
        }
    }

    /// What `HttpBuilder::proxy` takes (no path: serenity appends `/api/v10/...`).
    pub fn api_url(&self) -> String {
        self.api_url.clone()
    }

    pub fn gateway_url(&self) -> String {
        self.shared.gateway_url.clone()
    }

    /// Interval announced in the next HELLO (Discord: ~41 250 ms).
    pub fn set_heartbeat_interval(&self, ms: u64) {
        self.shared
            .heartbeat_interval_ms
            .store(ms, Ordering::Relaxed);
    }

    pub fn set_echo_own_messages(&self, on: bool) {
        self.shared.echo_own_messages.store(on, Ordering::Relaxed);
    }

    // ---- injection -------------------------------------------------------------------------

    /// Sends any dispatch (`op 0`) with the next sequence number of the session.
    pub fn dispatch(&self, event: &str, d: Value) {
        let mut inner = self.shared.lock();
        self.shared.dispatch_locked(&mut inner, event, d);
    }

    /// A user's MESSAGE_CREATE. `mentions_bot` adds the bot to `mentions` (the content is not
    /// changed: put `<@1000>` in it yourself if the adapter parses text). Returns the message id.
    pub fn dispatch_message_create(
        &self,
        channel_id: u64,
        guild_id: Option<u64>,
        author_id: u64,
        content: &str,
        mentions_bot: bool,
        referenced_message: Option<u64>,
    ) -> u64 {
        let id = self.shared.new_id();
        let mut inner = self.shared.lock();
        if let Some(g) = guild_id {
            inner.channel_guild.insert(channel_id, g);
        }
        let reference = referenced_message.map(|r| (r, inner.messages.get(&r).cloned()));
        let mentions = if mentions_bot {
            vec![payloads::user(BOT_USER_ID)]
        } else {
            vec![]
        };
        let msg = payloads::message(payloads::MessageParts {
            id,
            channel_id,
            guild_id,
            author_id,
            content,
            mentions,
            reference,
        });
        inner.messages.insert(id, msg.clone());
        self.shared
            .dispatch_locked(&mut inner, "MESSAGE_CREATE", msg);
        id
    }

    /// A slash-command INTERACTION_CREATE with string options. Returns (interaction id, token).
    pub fn dispatch_interaction_create(
        &self,
        channel_id: u64,
        guild_id: Option<u64>,
        user_id: u64,
        command: &str,
        string_options: &[(&str, &str)],
    ) -> (u64, String) {
        let id = self.shared.new_id();
        let token = format!("itoken-{id}");
        let mut inner = self.shared.lock();
        inner.interaction_channels.insert(token.clone(), channel_id);
        let command_id = inner
            .commands
            .iter()
            .find(|c| c.name == command)
            .map(|c| c.id)
            .unwrap_or_else(|| self.shared.new_id());
        let d = payloads::interaction(payloads::InteractionParts {
            id,
            token: &token,
            command_id,
            channel_id,
            guild_id,
            user_id,
            command,
            string_options,
        });
        self.shared
            .dispatch_locked(&mut inner, "INTERACTION_CREATE", d);
        (id, token)
    }

    /// A button press (MESSAGE_COMPONENT interaction, type 3) on the bot's message
    /// `message_id` in `channel_id`, by `user_id` with `roles`, carrying `custom_id`. Returns
    /// (interaction id, token).
    pub fn dispatch_button_press(
        &self,
        channel_id: u64,
        guild_id: Option<u64>,
        user_id: u64,
        roles: &[u64],
        message_id: u64,
        custom_id: &str,
    ) -> (u64, String) {
        let id = self.shared.new_id();
        let token = format!("itoken-{id}");
        let mut inner = self.shared.lock();
        inner.interaction_channels.insert(token.clone(), channel_id);
        let message = inner.messages.get(&message_id).cloned().unwrap_or_else(|| {
            payloads::message(payloads::MessageParts {
                id: message_id,
                channel_id,
                guild_id,
                author_id: payloads::BOT_USER_ID,
                content: "question",
                mentions: vec![],
                reference: None,
            })
        });
        let d = payloads::component_interaction(
            payloads::InteractionParts {
                id,
                token: &token,
                command_id: 0,
                channel_id,
                guild_id,
                user_id,
                command: "",
                string_options: &[],
            },
            roles,
            message,
            custom_id,
        );
        self.shared
            .dispatch_locked(&mut inner, "INTERACTION_CREATE", d);
        (id, token)
    }

    /// GUILD_CREATE with text channels `(id, name)` and threads `(id, name, parent_id)`; the
    /// channels also answer `GET /channels/{id}`.
    pub fn guild_create(
        &self,
        guild_id: u64,
        channels: &[(u64, &str)],
        threads: &[(u64, &str, u64)],
    ) {
        let chans: Vec<Value> = channels
            .iter()
            .map(|(id, name)| payloads::channel(*id, guild_id, name, None))
            .collect();
        let thrs: Vec<Value> = threads
            .iter()
            .map(|(id, name, parent)| payloads::channel(*id, guild_id, name, Some(*parent)))
            .collect();
        let mut inner = self.shared.lock();
        for c in chans.iter().chain(&thrs) {
            let id = c["id"].as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
            inner.channels.insert(id, c.clone());
            inner.channel_guild.insert(id, guild_id);
        }
        let d = payloads::guild_create(guild_id, chans, thrs);
        self.shared.dispatch_locked(&mut inner, "GUILD_CREATE", d);
    }

    /// The next REST request whose path (after `/api/v10`) starts with `route_prefix`, e.g.
    /// `/channels/42/messages`, meets `fault`. Faults queue in order.
    pub fn fail_next_rest(&self, route_prefix: &str, fault: Fault) {
        self.shared
            .lock()
            .faults
            .push((route_prefix.to_string(), fault));
    }
}

/// Runs `fut` under `timeout`, panicking with `what`: every test wait must be bounded.
pub async fn within<T>(what: &str, timeout: Duration, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(timeout, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {timeout:?} waiting for {what}"),
    }
}
