//! What the bot did and what the fake delivered, read back by tests, and bounded waits on it.
//!
//! Reads only: nothing here changes the workspace, so a test may poll as often as it likes
//! without disturbing the conversation it observes.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::FakeSlack;

/// One accepted `chat.postMessage`.
#[derive(Clone, Debug)]
pub struct Post {
    pub channel: String,
    pub ts: String,
    pub text: String,
    pub thread_ts: Option<String>,
    pub blocks: Option<Value>,
    pub mrkdwn: Option<bool>,
    /// `{event_type, event_payload}` as posted.
    pub metadata: Option<Value>,
    pub reply_broadcast: bool,
    /// Every argument as received (JSON values, or strings from a form), the token removed.
    pub args: Value,
    pub at: Instant,
    /// Wall-clock epoch milliseconds of `at` (to compare with a kill's time).
    pub at_ms: i64,
}

/// An interactive element of a posted message's blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Button {
    pub block_id: String,
    pub action_id: String,
    pub value: Option<String>,
    pub text: String,
    pub style: Option<String>,
}

impl Post {
    /// `metadata.event_payload.key`, the adapter's idempotency key.
    pub fn metadata_key(&self) -> Option<String> {
        let key = &self.metadata.as_ref()?["event_payload"]["key"];
        key.as_str().map(str::to_string)
    }

    /// The buttons of its `actions` blocks, in order.
    pub fn buttons(&self) -> Vec<Button> {
        buttons_of(self.blocks.as_ref())
    }
}

pub(crate) fn buttons_of(blocks: Option<&Value>) -> Vec<Button> {
    let mut out = Vec::new();
    for block in blocks.and_then(Value::as_array).into_iter().flatten() {
        let block_id = block["block_id"].as_str().unwrap_or_default();
        for el in block["elements"].as_array().into_iter().flatten() {
            if el["type"] != "button" {
                continue;
            }
            out.push(Button {
                block_id: block_id.to_string(),
                action_id: el["action_id"].as_str().unwrap_or_default().to_string(),
                value: el["value"].as_str().map(str::to_string),
                text: el["text"]["text"].as_str().unwrap_or_default().to_string(),
                style: el["style"].as_str().map(str::to_string),
            });
        }
    }
    out
}

/// One accepted `chat.update`.
#[derive(Clone, Debug)]
pub struct Edit {
    pub channel: String,
    pub ts: String,
    pub text: String,
    pub blocks: Option<Value>,
    pub args: Value,
    pub at: Instant,
}

/// One accepted `chat.delete`.
#[derive(Clone, Debug)]
pub struct Delete {
    pub channel: String,
    pub ts: String,
    pub at: Instant,
}

/// One file the bot shared: bytes sent to an upload URL, then `files.completeUploadExternal`.
#[derive(Clone, Debug)]
pub struct Upload {
    pub file_id: String,
    pub filename: String,
    pub title: Option<String>,
    pub bytes: Vec<u8>,
    /// The `length` given to `files.getUploadURLExternal`.
    pub declared_length: usize,
    /// Of the bytes' POST (raw body or multipart part).
    pub content_type: Option<String>,
    pub channel: Option<String>,
    pub thread_ts: Option<String>,
    pub initial_comment: Option<String>,
    /// The file-share message in the channel, when shared to one.
    pub share_ts: Option<String>,
    pub at: Instant,
}

/// One Web API call, whatever its outcome.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    /// `GET` or `POST`.
    pub http_method: String,
    pub args: Value,
    /// The HTTP status answered (200 also for `ok:false`).
    pub status: u16,
    /// The `error` of an `ok:false` answer (`ratelimited` for a 429).
    pub error: Option<String>,
    /// When it arrived.
    pub at: Instant,
    pub at_ms: i64,
}

/// One Socket Mode acknowledgement frame.
#[derive(Clone, Debug)]
pub struct Ack {
    pub envelope_id: String,
    pub connection: u64,
    pub payload: Option<Value>,
    /// False when no envelope has that id.
    pub known: bool,
    /// False when the envelope was already acknowledged.
    pub first: bool,
    pub at: Instant,
}

/// One Socket Mode connection.
#[derive(Clone, Debug)]
pub struct Connection {
    pub id: u64,
    pub ticket: String,
    pub opened_at: Instant,
    pub closed_at: Option<Instant>,
    /// `client closed`, `dropped`, `disconnect: <reason>`.
    pub close: Option<String>,
}

/// Where one delivery attempt went.
#[derive(Clone, Debug)]
pub enum Route {
    Socket {
        connection: u64,
    },
    /// A signed POST; `status` is `None` when no answer came (timeout, refused connection).
    Http {
        url: String,
        status: Option<u16>,
        /// The `X-Slack-Retry-Reason` the next attempt gives, when this one failed.
        failure: Option<String>,
        body: String,
    },
}

/// One attempt to hand an event, action or command to the app.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub envelope_id: String,
    pub event_id: Option<String>,
    /// `events_api`, `interactive` or `slash_commands`.
    pub kind: String,
    pub retry_attempt: u32,
    pub route: Route,
    pub at: Instant,
}

/// The state of one envelope (Socket Mode) now.
#[derive(Clone, Debug)]
pub struct EnvelopeView {
    pub envelope_id: String,
    pub event_id: Option<String>,
    pub kind: String,
    /// `event.type` of an events envelope (`message`, `app_mention`, …).
    pub event_type: Option<String>,
    /// `event.channel` and `event.ts`: which message an events envelope is about.
    pub channel: Option<String>,
    pub ts: Option<String>,
    pub deliveries: u32,
    pub acked: bool,
    /// Retries ran out before an ack.
    pub given_up: bool,
}

/// One GET of a private file URL.
#[derive(Clone, Debug)]
pub struct FileFetch {
    pub path: String,
    pub file_id: Option<String>,
    /// The bot token was presented (and valid, with `files:read`).
    pub authorized: bool,
    pub status: u16,
    pub at: Instant,
}

/// One POST to a `response_url` of a click or a slash command.
#[derive(Clone, Debug)]
pub struct UrlPost {
    pub response_url: String,
    pub body: Value,
    pub at: Instant,
}

#[derive(Default)]
pub(crate) struct Records {
    pub posts: Vec<Post>,
    pub edits: Vec<Edit>,
    pub deletes: Vec<Delete>,
    pub uploads: Vec<Upload>,
    pub calls: Vec<Call>,
    pub acks: Vec<Ack>,
    pub connections: Vec<Connection>,
    pub deliveries: Vec<Delivery>,
    pub file_fetches: Vec<FileFetch>,
    pub url_posts: Vec<UrlPost>,
}

impl FakeSlack {
    pub fn posted(&self) -> Vec<Post> {
        self.shared.lock().rec.posts.clone()
    }

    /// The bot's posts in one channel, in order.
    pub fn posted_in(&self, channel: &str) -> Vec<Post> {
        let st = self.shared.lock();
        st.rec
            .posts
            .iter()
            .filter(|p| p.channel == channel)
            .cloned()
            .collect()
    }

    pub fn edits(&self) -> Vec<Edit> {
        self.shared.lock().rec.edits.clone()
    }

    pub fn deletes(&self) -> Vec<Delete> {
        self.shared.lock().rec.deletes.clone()
    }

    pub fn uploads(&self) -> Vec<Upload> {
        self.shared.lock().rec.uploads.clone()
    }

    /// Every call of `method` (e.g. `chat.postMessage`), in arrival order.
    pub fn calls(&self, method: &str) -> Vec<Call> {
        let st = self.shared.lock();
        let calls = st.rec.calls.iter().filter(|c| c.method == method);
        calls.cloned().collect()
    }

    pub fn all_calls(&self) -> Vec<Call> {
        self.shared.lock().rec.calls.clone()
    }

    pub fn acks(&self) -> Vec<Ack> {
        self.shared.lock().rec.acks.clone()
    }

    pub fn connections(&self) -> Vec<Connection> {
        self.shared.lock().rec.connections.clone()
    }

    /// Socket Mode connections open now.
    pub fn live_connections(&self) -> usize {
        self.shared.lock().conns.len()
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.shared.lock().rec.deliveries.clone()
    }

    pub fn envelopes(&self) -> Vec<EnvelopeView> {
        let st = self.shared.lock();
        st.envelopes.iter().map(|e| e.view()).collect()
    }

    /// Envelopes neither acknowledged nor given up.
    pub fn pending_envelopes(&self) -> usize {
        let st = self.shared.lock();
        st.envelopes.iter().filter(|e| e.pending()).count()
    }

    pub fn file_fetches(&self) -> Vec<FileFetch> {
        self.shared.lock().rec.file_fetches.clone()
    }

    pub fn response_url_posts(&self) -> Vec<UrlPost> {
        self.shared.lock().rec.url_posts.clone()
    }

    /// What a person sees in `channel` now: every message not deleted (people's and the
    /// bot's, thread replies included) as `(ts, user or bot id, text)`, oldest first.
    pub fn channel_view(&self, channel: &str) -> Vec<(String, String, String)> {
        let st = self.shared.lock();
        let Some(ch) = st.channels.get(channel) else {
            return Vec::new();
        };
        ch.messages
            .iter()
            .filter(|m| !m.deleted)
            .map(|m| {
                let who = m.user.clone().or(m.bot_id.clone()).unwrap_or_default();
                (m.ts.clone(), who, m.text.clone())
            })
            .collect()
    }

    /// Polls `probe` until it yields a value; panics with `what` after `timeout`.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut(&FakeSlack) -> Option<T>,
    ) -> T {
        let what = format!("fake slack: {what}");
        crate::harness::wait_for(&what, timeout, async || probe(self)).await
    }

    /// Waits until at least `n` messages were posted; returns all posted so far.
    pub async fn wait_for_posts(&self, n: usize, timeout: Duration) -> Vec<Post> {
        self.wait_for(&format!("{n} chat.postMessage call(s)"), timeout, |f| {
            let posts = f.posted();
            (posts.len() >= n).then_some(posts)
        })
        .await
    }

    /// Waits until at least `n` acknowledgements arrived; returns them all.
    pub async fn wait_for_acks(&self, n: usize, timeout: Duration) -> Vec<Ack> {
        self.wait_for(&format!("{n} ack(s)"), timeout, |f| {
            let acks = f.acks();
            (acks.len() >= n).then_some(acks)
        })
        .await
    }

    /// Waits until a Socket Mode connection is open (its `hello` sent).
    pub async fn wait_connected(&self, timeout: Duration) {
        self.wait_for("a Socket Mode connection", timeout, |f| {
            (f.live_connections() > 0).then_some(())
        })
        .await
    }
}
