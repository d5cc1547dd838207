//! A fake Telegram Bot API server for tests, speaking the real wire format so the real teloxide
//! client (`Bot::new(token).set_api_url(fake.url())`) runs against it unchanged.
//!
//! Tests inject updates (served by true long polling), read back what the bot sent, and queue
//! faults (rate limits, 500s, delays, dropped connections, rejected Markdown) per method.
//! Must not: talk to the network beyond 127.0.0.1, or behave more leniently than Telegram where
//! the daemon's correctness depends on it (offset confirmation, 401 on a wrong token, 409 for a
//! second poller or a poller while a webhook is set).

mod files;
mod form;
mod json;
mod media;
mod server;
mod uploads;

pub use uploads::Upload;

pub use files::{serve_bytes, FileFault, FileInfo};
pub use media::Media;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

// Re-exported for other tests to build their own payloads; not every test binary uses each.
#[allow(unused_imports)]
pub use json::{
    bot_user_json, chat_json, in_topic, me_json, message_json, message_update_json, user_json,
    with_mention, BOT_USERNAME,
};

/// One message the bot sent with `sendMessage`, as the fake recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentMessage {
    pub chat_id: i64,
    pub thread_id: Option<i64>,
    pub text: String,
    pub parse_mode: Option<String>,
    pub reply_to: Option<i64>,
    pub message_id: i64,
    /// The `callback_data` of its inline keyboard's buttons, row by row (empty: no keyboard).
    pub buttons: Vec<String>,
}

/// A message the bot sent with a two-button inline keyboard: an approval question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub message_id: i64,
    pub text: String,
    /// The data of its first button (Approve) and of its second (Deny).
    pub approve: String,
    pub deny: String,
}

/// One `editMessageText` the fake accepted, with the instant it did.
#[derive(Debug, Clone)]
pub struct EditedMessage {
    pub chat_id: i64,
    pub message_id: i64,
    pub text: String,
    pub parse_mode: Option<String>,
    pub at: Instant,
}

/// A failure the next call to a method meets instead of (or before) its normal answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// 429 with `parameters.retry_after` = secs; nothing is processed.
    RetryAfter(u64),
    /// 500 Internal Server Error; nothing is processed. (teloxide sleeps 10 s on any 5xx before
    /// reading the body — use `tokio::time::pause()` or expect the wait.)
    ServerError,
    /// Answer normally after this long.
    Delay(Duration),
    /// Close the connection without an answer; the request is not processed.
    Drop,
    /// Process the request (a message is sent and recorded), then close the connection without
    /// an answer: the case where a client cannot know its message got through.
    DropAfterProcessing,
    /// Process the request (a message or upload is recorded), then answer only after this
    /// long: a client killed meanwhile never learns that it got through.
    AnswerLate(Duration),
    /// 400 "Bad Request: can't parse entities…". Only meets a `sendMessage` or `editMessageText`
    /// with `parse_mode` set; calls without one pass and leave it queued.
    BadEntities,
    /// 400 with this description ("Bad Request: …"); nothing is processed. A refusal the
    /// daemon must treat as permanent.
    Refused(String),
}

/// A running fake; stops on [`FakeTelegram::shutdown`] or drop.
pub struct FakeTelegram {
    state: Arc<State>,
    url: String,
    task: Option<JoinHandle<()>>,
}

pub(crate) struct State {
    token: String,
    /// Tokens accepted besides `token` ([`FakeTelegram::accept_token`]; a rotated token).
    extra_tokens: Mutex<Vec<String>>,
    /// Requests per presented token, refused ones included.
    by_token: Mutex<HashMap<String, usize>>,
    inner: Mutex<Inner>,
    /// Files served by `getFile` and the download route.
    files: Mutex<files::Files>,
    /// Woken when an update is pushed or a newer `getUpdates` supersedes a waiting one.
    changed: Notify,
    stop: CancellationToken,
}

#[derive(Default)]
pub(crate) struct Inner {
    updates: VecDeque<Value>,
    next_update_id: i64,
    next_message_id: i64,
    sent: Vec<SentMessage>,
    /// When each of `sent` was recorded.
    sent_at: Vec<Instant>,
    edits: Vec<EditedMessage>,
    /// (chat, message) pairs removed with `deleteMessage`.
    deleted: Vec<(i64, i64)>,
    calls: HashMap<String, Vec<Value>>,
    faults: HashMap<String, VecDeque<Fault>>,
    webhook_url: String,
    /// Bumped by every `getUpdates`, so an older waiting poll can tell it was superseded.
    poll_generation: u64,
    /// Files sent with `sendPhoto` / `sendDocument` (`uploads.rs`).
    uploads: Vec<uploads::Upload>,
    /// Told of every `sendMessage` as it is recorded (see [`FakeTelegram::subscribe_sent`]).
    sent_listeners: Vec<mpsc::UnboundedSender<(SentMessage, Instant)>>,
    /// Told of every accepted `editMessageText` (see [`FakeTelegram::subscribe_edits`]).
    edit_listeners: Vec<mpsc::UnboundedSender<EditedMessage>>,
}

impl Inner {
    fn view(&self, chat_id: i64) -> Vec<SentMessage> {
        self.sent
            .iter()
            .filter(|m| m.chat_id == chat_id && !self.deleted.contains(&(chat_id, m.message_id)))
            .map(|m| {
                let mut m = m.clone();
                if let Some(e) = self
                    .edits
                    .iter()
                    .rev()
                    .find(|e| e.chat_id == chat_id && e.message_id == m.message_id)
                {
                    m.text = e.text.clone();
                    m.parse_mode = e.parse_mode.clone();
                }
                m
            })
            .collect()
    }
}

impl State {
    /// Counts a request presenting `token` and says whether the token is accepted.
    pub(crate) fn admit(&self, token: &str) -> bool {
        *self
            .by_token
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(token.to_string())
            .or_default() += 1;
        token == self.token
            || self
                .extra_tokens
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .any(|t| t == token)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A test that panicked while holding the lock already failed; keep serving the rest.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl FakeTelegram {
    /// Starts the fake on 127.0.0.1 with an ephemeral port; only `token` is accepted (and
    /// those [`FakeTelegram::accept_token`] adds).
    pub async fn start(token: &str) -> FakeTelegram {
        // reqwest 0.13 without a default provider panics when a client is built; tests that use
        // this fake talk HTTP through reqwest, so make sure one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake telegram");
        let addr = listener.local_addr().expect("fake telegram address");
        let state = Arc::new(State {
            token: token.to_owned(),
            extra_tokens: Mutex::default(),
            by_token: Mutex::default(),
            inner: Mutex::new(Inner {
                next_update_id: 1,
                next_message_id: 1,
                ..Inner::default()
            }),
            files: Mutex::default(),
            changed: Notify::new(),
            stop: CancellationToken::new(),
        });
        let app = server::router(state.clone());
        let stop = state.stop.clone();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        });
        FakeTelegram {
            state,
            url: format!("http://{addr}"),
            task: Some(task),
        }
    }

    /// Base URL without a trailing slash, for `Bot::set_api_url`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn token(&self) -> &str {
        &self.state.token
    }

    /// Queues an update as given; the caller owns its `update_id`.
    pub fn push_update_raw(&self, update: Value) {
        let mut inner = self.state.lock();
        if let Some(id) = update["update_id"].as_i64() {
            inner.next_update_id = inner.next_update_id.max(id + 1);
        }
        inner.updates.push_back(update);
        drop(inner);
        self.state.changed.notify_waiters();
    }

    /// Queues a message update built from `message` with the next update id, and returns that id.
    /// The id is taken and the update queued under one lock, as Telegram numbers updates in
    /// queue order: two pushers racing between the two steps could queue id N after N + 1, and
    /// the daemon's offset confirmation for N + 1 would then drop N unseen.
    pub fn push_message(&self, build: impl FnOnce(i64) -> Value) -> i64 {
        let mut inner = self.state.lock();
        let (update_id, message_id) = (inner.next_update_id, inner.next_message_id);
        inner.next_update_id += 1;
        inner.next_message_id += 1;
        inner
            .updates
            .push_back(message_update_json(update_id, build(message_id)));
        drop(inner);
        self.state.changed.notify_waiters();
        update_id
    }

    /// A text message in a private chat (`chat_id` > 0).
    pub fn push_private_text(&self, chat_id: i64, from_id: i64, text: &str) -> i64 {
        self.push_message(|id| message_json(id, chat_id, from_id, text))
    }

    /// A text message in a group (`chat_id` < 0), optionally with a mention entity over the
    /// first occurrence of `entities_mention` (e.g. `"@herald_test_bot"`) in `text`.
    pub fn push_group_text(
        &self,
        chat_id: i64,
        from_id: i64,
        text: &str,
        entities_mention: Option<&str>,
    ) -> i64 {
        self.push_message(|id| {
            let mut message = message_json(id, chat_id, from_id, text);
            if let Some(mention) = entities_mention {
                with_mention(&mut message, mention);
            }
            message
        })
    }

    /// A text message in forum topic `thread_id` of supergroup `chat_id`.
    pub fn push_topic_text(&self, chat_id: i64, thread_id: i64, from_id: i64, text: &str) -> i64 {
        self.push_message(|id| {
            let mut message = message_json(id, chat_id, from_id, text);
            in_topic(&mut message, thread_id);
            message
        })
    }

    /// A text message replying to message `reply_to`; when the bot sent that message, the
    /// reply carries its text and the bot as author, as Telegram does.
    pub fn push_reply(&self, chat_id: i64, from_id: i64, text: &str, reply_to: i64) -> i64 {
        let original = self
            .sent_messages()
            .into_iter()
            .find(|m| m.message_id == reply_to);
        let (author, original_text) = match &original {
            Some(m) => (bot_user_json(&self.state.token), m.text.clone()),
            None => (user_json(from_id), String::new()),
        };
        self.push_message(|id| {
            let mut message = message_json(id, chat_id, from_id, text);
            message["reply_to_message"] =
                json::replied_message_json(reply_to, &message["chat"], author, &original_text);
            message
        })
    }

    /// Every `sendMessage` the fake answered (or processed before dropping), in order.
    /// A press of an inline keyboard button under the bot's message `message_id` in
    /// `chat_id`, by `from_id`, carrying `data`; returns the update id.
    pub fn push_button_press(
        &self,
        chat_id: i64,
        from_id: i64,
        message_id: i64,
        data: &str,
    ) -> i64 {
        let mut inner = self.state.lock();
        let update_id = inner.next_update_id;
        inner.next_update_id += 1;
        let message = serde_json::json!({
            "message_id": message_id,
            "from": bot_user_json(&self.state.token),
            "chat": chat_json(chat_id, false),
            "date": json::now_unix(),
            "text": "question",
        });
        inner.updates.push_back(serde_json::json!({
            "update_id": update_id,
            "callback_query": {
                "id": format!("cbq-{update_id}"),
                "from": user_json(from_id),
                "message": message,
                "chat_instance": format!("ci-{chat_id}"),
                "data": data,
            }
        }));
        drop(inner);
        self.state.changed.notify_waiters();
        update_id
    }

    /// The approval questions the bot sent, oldest first.
    pub fn questions(&self) -> Vec<Question> {
        self.sent_messages()
            .into_iter()
            .filter(|m| m.buttons.len() >= 2)
            .map(|m| Question {
                message_id: m.message_id,
                approve: m.buttons[0].clone(),
                deny: m.buttons[1].clone(),
                text: m.text,
            })
            .collect()
    }

    pub fn sent_messages(&self) -> Vec<SentMessage> {
        self.state.lock().sent.clone()
    }

    /// Every `sendMessage` with the instant the fake recorded it.
    pub fn sent_with_times(&self) -> Vec<(SentMessage, Instant)> {
        let inner = self.state.lock();
        inner
            .sent
            .iter()
            .cloned()
            .zip(inner.sent_at.iter().copied())
            .collect()
    }

    /// Every accepted `editMessageText`, in order.
    pub fn edits(&self) -> Vec<EditedMessage> {
        self.state.lock().edits.clone()
    }

    /// What a person sees in `chat_id` now: the bot's messages not deleted, each with its
    /// latest text and parse mode, in the order they were sent.
    pub fn chat_view(&self, chat_id: i64) -> Vec<SentMessage> {
        self.state.lock().view(chat_id)
    }

    /// Accepts `token` too from now on (a token rotated in BotFather: keep the numeric prefix,
    /// so the bot stays the same user).
    pub fn accept_token(&self, token: &str) {
        let mut extra = self
            .state
            .extra_tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        extra.push(token.to_string());
    }

    /// How many requests presented `token` (on `/bot<token>/` or the file route), refused ones
    /// included.
    pub fn requests_with_token(&self, token: &str) -> usize {
        let by = self
            .state
            .by_token
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        by.get(token).copied().unwrap_or(0)
    }

    /// The parameters of every request to `method` (any case), faulted ones included.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        let inner = self.state.lock();
        inner
            .calls
            .get(&method.to_ascii_lowercase())
            .cloned()
            .unwrap_or_default()
    }

    /// Every `sendMessage` recorded from now on, with the instant the fake recorded it: a
    /// driver timing replies gets them as they happen instead of polling `sent_messages`.
    pub fn subscribe_sent(&self) -> mpsc::UnboundedReceiver<(SentMessage, Instant)> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.state.lock().sent_listeners.push(tx);
        rx
    }

    /// Every `editMessageText` accepted from now on, as it is recorded: a driver timing when
    /// a streamed answer reached its final form.
    pub fn subscribe_edits(&self) -> mpsc::UnboundedReceiver<EditedMessage> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.state.lock().edit_listeners.push(tx);
        rx
    }

    /// Updates still queued, i.e. not yet confirmed by a `getUpdates` offset.
    pub fn pending_updates(&self) -> usize {
        self.state.lock().updates.len()
    }

    /// Waits until at least `n` messages were sent and returns them all; panics with what was
    /// sent if that does not happen within `timeout`.
    pub async fn wait_for_sent(&self, n: usize, timeout: Duration) -> Vec<SentMessage> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let sent = self.sent_messages();
            if sent.len() >= n {
                return sent;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("expected {n} sent messages within {timeout:?}, got {sent:#?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Queues `fault` for the next call to `method` (any case); faults apply in queue order.
    pub fn fail_next(&self, method: &str, fault: Fault) {
        let mut inner = self.state.lock();
        let queue = inner.faults.entry(method.to_ascii_lowercase()).or_default();
        queue.push_back(fault);
    }

    /// Stops serving: waiting long polls return, then the server task ends.
    pub async fn shutdown(mut self) {
        self.state.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        self.state.stop.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
