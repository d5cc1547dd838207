//! A fake Slack on 127.0.0.1 for end-to-end tests: the Web API under `<base>/api/`, Socket Mode
//! on its own websocket port, Events API posts signed as Slack signs them, and the private
//! file host. Proven with plain reqwest and tokio-tungstenite in
//! `tests/it/fake_slack_selftest.rs`.
//!
//! It exists so the Slack adapter runs its real HTTP and websocket code with no network. It
//! must not be kinder than Slack where the adapter's correctness depends on it: unacked
//! envelopes come back (same event id, `retry_attempt` + 1), `ok:false` answers come with
//! HTTP 200, a 429 carries `Retry-After`, history hides `metadata` unless asked for it, a file
//! fetched without the bot token is an HTML login page with status 200. It records what the bot
//! did so tests assert on what a person in Slack would see.
//!
//! Deliberate differences from Slack, to keep tests fast and deterministic:
//! - An unacked envelope is redelivered `ack_timeout` (3 s, settable) after its delivery, each
//!   time; Slack waits about 1 and 5 minutes between its 3 retries. The retry limit is Slack's
//!   (3) unless set otherwise; `retry_reason` is `"timeout"`.
//! - Events API retries wait 1 s then 2 s then 2 s (settable), not 1 and 5 minutes.
//! - Message text is put on the wire as the test wrote it (write `&lt;` yourself): Slack's
//!   clients escape `&`, `<`, `>` before it does.
//! - Ids (`ts`, `Ev…`, `F…`) come from one counter, so every `ts` is unique across channels
//!   (Slack's are only unique within one channel).
//! - Only the app token may open a socket and only a bot token may call the other methods
//!   (`not_allowed_token_type` otherwise); `files.getUploadURLExternal` ignores a JSON body
//!   (form or query only, as reported of Slack), so its arguments are missing then.

mod actions;
mod args;
mod chat;
mod control;
mod conversations;
mod envelopes;
mod events_api;
mod files;
mod inject;
mod payloads;
mod records;
pub mod sign;
mod socket;
mod state;
mod web;

pub use events_api::{HttpReply, Signing};
pub use inject::SharedFile;
pub use records::{
    Ack, Button, Call, Connection, Delete, Delivery, Edit, EnvelopeView, FileFetch, Post, Route,
    Upload, UrlPost,
};
/// The websocket client the self-test drives Socket Mode with (the crate the fake serves with).
pub use tokio_tungstenite;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub const DEFAULT_BOT_TOKEN: &str = "xoxb-0001-fake-bot-token";
pub const DEFAULT_APP_TOKEN: &str = "xapp-1-A0001-fake-app-token";
pub const DEFAULT_SIGNING_SECRET: &str = "8f2c0fakesigningsecret0a1b2c3d4e";
pub const BOT_USER_ID: &str = "UBOT0001";
pub const BOT_ID: &str = "BBOT0001";

/// The bot scopes a fresh fake grants: those the app manifest asks for.
pub const DEFAULT_SCOPES: &[&str] = &[
    "app_mentions:read",
    "channels:history",
    "channels:read",
    "chat:write",
    "commands",
    "files:read",
    "files:write",
    "groups:history",
    "groups:read",
    "im:history",
    "im:read",
    "mpim:history",
    "mpim:read",
    "users:read",
];

/// Who the fake workspace and app are. Every field has a default ([`FakeSlackConfig::default`]).
#[derive(Clone, Debug)]
pub struct FakeSlackConfig {
    /// `xoxb-…`: the Web API token.
    pub bot_token: String,
    /// `xapp-…`: the app-level token that opens Socket Mode connections.
    pub app_token: String,
    /// Signs Events API and interactive posts.
    pub signing_secret: String,
    /// The legacy `token` field of event payloads.
    pub verification_token: String,
    pub bot_user_id: String,
    pub bot_id: String,
    pub team_id: String,
    pub team_domain: String,
    pub app_id: String,
}

impl Default for FakeSlackConfig {
    fn default() -> Self {
        FakeSlackConfig {
            bot_token: DEFAULT_BOT_TOKEN.into(),
            app_token: DEFAULT_APP_TOKEN.into(),
            signing_secret: DEFAULT_SIGNING_SECRET.into(),
            verification_token: "fakeverificationtoken0001".into(),
            bot_user_id: BOT_USER_ID.into(),
            bot_id: BOT_ID.into(),
            team_id: "TFAKE0001".into(),
            team_domain: "herald-fake".into(),
            app_id: "AFAKE0001".into(),
        }
    }
}

/// What the next matching Web API call meets instead of its normal answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 429, `Retry-After: secs`, `{"ok":false,"error":"ratelimited"}`; nothing is done.
    RateLimited { retry_after_secs: u64 },
    /// HTTP 200 `{"ok":false,"error":code}`; nothing is done.
    Error(String),
    /// This HTTP status with an empty body (Slack's 5xx pages are not JSON); nothing is done.
    Status(u16),
    /// Answer normally after this long.
    Delay(Duration),
}

pub(crate) struct Shared {
    pub cfg: FakeSlackConfig,
    /// `http://127.0.0.1:P`, no trailing slash.
    pub base: String,
    /// `ws://127.0.0.1:Q` of the Socket Mode listener.
    pub ws_base: String,
    /// Posts to the daemon in Events API mode.
    pub http: reqwest::Client,
    state: Mutex<state::State>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, state::State> {
        // A panicking test thread must not hide the records from the next assertion.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake; its servers stop when it is dropped.
pub struct FakeSlack {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        // A client still connected must see Slack go away, not a socket that stays silent.
        self.drop_connections();
    }
}

impl FakeSlack {
    /// Starts the HTTP side and the Socket Mode listener on free 127.0.0.1 ports.
    pub async fn start(cfg: FakeSlackConfig) -> FakeSlack {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let web = TcpListener::bind("127.0.0.1:0").await.expect("bind web");
        let ws = TcpListener::bind("127.0.0.1:0").await.expect("bind socket");
        let base = format!("http://{}", web.local_addr().expect("web addr"));
        let ws_base = format!("ws://{}", ws.local_addr().expect("socket addr"));
        let shared = Arc::new(Shared {
            state: Mutex::new(state::State::new(&cfg)),
            cfg,
            base,
            ws_base,
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("http client"),
        });
        let tasks = vec![
            tokio::spawn(web::serve(web, shared.clone())),
            tokio::spawn(socket::serve(ws, shared.clone())),
            tokio::spawn(envelopes::tick(Arc::downgrade(&shared))),
        ];
        FakeSlack { shared, tasks }
    }

    /// `http://127.0.0.1:P`: the file host and the control endpoints live here.
    pub fn base_url(&self) -> String {
        self.shared.base.clone()
    }

    /// `<base>/api`: what the adapter's `api_url` is set to.
    pub fn api_url(&self) -> String {
        format!("{}/api", self.shared.base)
    }

    /// `ws://127.0.0.1:Q/link/`, informative: clients get a ticketed URL from
    /// `apps.connections.open`.
    pub fn socket_url(&self) -> String {
        format!("{}/link/", self.shared.ws_base)
    }

    pub fn config(&self) -> &FakeSlackConfig {
        &self.shared.cfg
    }

    // ---- workspace ---------------------------------------------------------------------------

    /// A channel the bot is a member of. The id's first letter sets its kind: `C` public,
    /// `G` private, `D` a direct message.
    pub fn add_channel(&self, id: &str, name: &str) {
        self.shared.lock().ensure_channel(id, Some(name));
    }

    /// Whether the bot is in `channel` (posting where it is not answers `not_in_channel`).
    pub fn set_bot_member(&self, channel: &str, member: bool) {
        self.shared.lock().ensure_channel(channel, None).bot_member = member;
    }

    /// A person with a handle and a full name (`users.info`); unknown users who appear in an
    /// injected event get `user-<id>` / `User <id>`.
    pub fn add_user(&self, id: &str, name: &str, real_name: &str) {
        self.shared.lock().set_user(id, name, real_name);
    }

    /// The direct-message channel of `user` with the bot (`D` + the user id after its first
    /// letter), created if needed.
    pub fn dm_channel(&self, user: &str) -> String {
        let mut st = self.shared.lock();
        st.dm_channel(user)
    }

    // ---- tokens and scopes -------------------------------------------------------------------

    /// Calls with `token` answer `token_revoked` (and sockets cannot be opened with it) until
    /// [`FakeSlack::restore`].
    pub fn revoke(&self, token: &str) {
        self.shared.lock().revoked.insert(token.to_string());
    }

    pub fn restore(&self, token: &str) {
        self.shared.lock().revoked.remove(token);
    }

    /// The scopes granted to the bot token (`x-oauth-scopes` on every answer).
    pub fn scopes(&self) -> Vec<String> {
        self.shared.lock().scopes.clone()
    }

    pub fn set_scopes(&self, scopes: &[&str]) {
        self.shared.lock().scopes = scopes.iter().map(|s| s.to_string()).collect();
    }

    /// Takes one scope away: the methods that need it answer `missing_scope` with `needed`.
    pub fn drop_scope(&self, scope: &str) {
        self.shared.lock().scopes.retain(|s| s != scope);
    }

    // ---- faults ------------------------------------------------------------------------------

    /// The next `times` calls of `method` (e.g. `chat.postMessage`) answer HTTP 429 with
    /// `Retry-After: retry_after_secs`. Arrival times stay in [`FakeSlack::calls`].
    pub fn rate_limit(&self, method: &str, times: usize, retry_after_secs: u64) {
        self.fail_next(method, times, Fault::RateLimited { retry_after_secs });
    }

    /// The next `times` calls of `method` meet `fault` (queued after any earlier ones).
    pub fn fail_next(&self, method: &str, times: usize, fault: Fault) {
        let mut st = self.shared.lock();
        let q = st.faults.entry(method.to_string()).or_default();
        q.extend(std::iter::repeat_n(fault, times));
    }

    // ---- delivery settings -------------------------------------------------------------------

    /// How long a delivered envelope (or an Events API post) may go unanswered before Slack
    /// counts it as failed and redelivers it.
    pub fn set_ack_timeout(&self, timeout: Duration) {
        self.shared.lock().ack_timeout = timeout;
    }

    /// Retries after the first delivery before an event is given up (`None`: never). Slack: 3.
    pub fn set_max_retries(&self, retries: Option<u32>) {
        self.shared.lock().max_retries = retries;
    }

    /// Whether the bot's own posts, edits and deletes come back as message events, as they do
    /// on Slack for subscribed channels (on by default).
    pub fn set_echo_own_messages(&self, on: bool) {
        self.shared.lock().echo_own = on;
    }

    /// Event subscriptions of the app (`message.im`, `message.channels`, `message.groups`,
    /// `message.mpim`, `app_mention` by default). Unsubscribed events are never delivered.
    pub fn set_subscribed(&self, event: &str, on: bool) {
        let mut st = self.shared.lock();
        if on {
            st.subscriptions.insert(event.to_string());
        } else {
            st.subscriptions.remove(event);
        }
    }
}
