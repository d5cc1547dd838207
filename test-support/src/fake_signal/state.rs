//! What the fake signal-cli daemon holds: the people and groups it knows, the envelopes waiting
//! for an event stream, the attachments it stored, the faults queued for the next calls, and a
//! record of everything the bot did (sends with edits, typing, reactions) in order.
//!
//! Must not: forget a send (the receipts of the crash runs count them), or hand out one
//! timestamp twice (Signal identifies a message by its author and timestamp).

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::mpsc;

/// What the next matching JSON-RPC call meets instead of its normal answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A send refused by Signal's rate limit, as signal-cli reports it: JSON-RPC error -5
    /// "Failed to send message due to rate limiting" with the per-recipient
    /// `RATE_LIMIT_FAILURE` result and its `retryAfterSeconds`. Nothing is sent.
    RateLimited { retry_after_secs: u64 },
    /// A JSON-RPC error with this code and message (-1 user error, -3 I/O, -32603 internal).
    Error { code: i64, message: String },
    /// This HTTP status with an empty body (the daemon is failing, or a proxy in front).
    Status(u16),
}

/// One message the bot sent (`send`), as the daemon took it.
#[derive(Clone, Debug)]
pub struct Sent {
    /// The message's Signal timestamp (its id with the bot as author).
    pub timestamp: u64,
    /// When the fake took it, and the same as epoch milliseconds (for the crash receipts).
    pub at: Instant,
    pub at_ms: i64,
    /// `+number` / uuid of a direct message, or `group:<id>`.
    pub chat: String,
    pub message: String,
    /// The files, read from the paths given at the moment of the send, as the daemon does.
    pub attachments: Vec<SentFile>,
    /// `quoteTimestamp` and `quoteAuthor`.
    pub quote: Option<(u64, String)>,
    /// `editTimestamp`: this send replaces the text of that earlier message.
    pub edit_of: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentFile {
    /// The file's name (the last part of its path).
    pub name: String,
    pub bytes: Vec<u8>,
}

/// A reaction or typing indicator the bot sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signalled {
    pub chat: String,
    /// `typing` / `typing-stop`, or the reaction's emoji.
    pub what: String,
    pub target: Option<u64>,
}

/// One JSON-RPC call as it arrived (method and params), for assertions on the wire.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub params: Value,
    pub at: Instant,
}

/// An attachment a person sent, kept until the bot asks for it with `getAttachment`.
#[derive(Clone, Debug)]
pub struct Stored {
    pub bytes: Vec<u8>,
}

pub struct State {
    next_ts: u64,
    /// Envelopes (their `data:` lines) not yet written to a stream: signal-cli receiving
    /// `on-connection` leaves them on Signal's server while nobody listens.
    pub pending: VecDeque<String>,
    /// Every envelope injected, by the sender's address and timestamp, for replays.
    pub injected: HashMap<(String, u64), String>,
    /// The open event streams.
    pub streams: Vec<mpsc::UnboundedSender<String>>,
    pub connections: usize,
    pub sent: Vec<Sent>,
    pub signalled: Vec<Signalled>,
    /// Messages the bot deleted for everyone (`remoteDelete`): (chat, timestamp).
    pub deleted: Vec<(String, u64)>,
    pub calls: Vec<Call>,
    pub faults: HashMap<String, VecDeque<Fault>>,
    pub attachments: HashMap<String, Stored>,
    /// Group id → (name, member addresses).
    pub groups: HashMap<String, (String, Vec<String>)>,
    /// Whether the account is registered (listAccounts, and every account method).
    pub registered: bool,
}

impl State {
    pub fn new() -> State {
        State {
            // Milliseconds like Signal's, from one counter so no two are alike.
            next_ts: chrono::Utc::now().timestamp_millis() as u64,
            pending: VecDeque::new(),
            injected: HashMap::new(),
            streams: Vec::new(),
            connections: 0,
            sent: Vec::new(),
            signalled: Vec::new(),
            deleted: Vec::new(),
            calls: Vec::new(),
            faults: HashMap::new(),
            attachments: HashMap::new(),
            groups: HashMap::new(),
            registered: true,
        }
    }

    /// A fresh timestamp, later than every one handed out before.
    pub fn stamp(&mut self) -> u64 {
        let now = chrono::Utc::now().timestamp_millis() as u64;
        self.next_ts = self.next_ts.max(now).max(self.next_ts + 1);
        self.next_ts
    }

    /// Writes `data` to every open stream, or keeps it for the next one when none is open
    /// (or every open one turned out closed).
    pub fn deliver(&mut self, data: String) {
        self.streams.retain(|s| !s.is_closed());
        let mut delivered = false;
        for s in &self.streams {
            delivered |= s.send(data.clone()).is_ok();
        }
        if !delivered {
            self.pending.push_back(data);
        }
    }

    /// The next queued fault for `method`, if any.
    pub fn fault(&mut self, method: &str) -> Option<Fault> {
        self.faults.get_mut(method)?.pop_front()
    }

    /// What a person in `chat` sees from the bot, in order: each message as its last edit
    /// left it, with its files; deleted ones gone.
    pub fn view(&self, chat: &str) -> Vec<(u64, String, Vec<SentFile>)> {
        let mut out: Vec<(u64, String, Vec<SentFile>)> = Vec::new();
        for s in self.sent.iter().filter(|s| s.chat == chat) {
            match s.edit_of {
                Some(target) => {
                    if let Some(m) = out.iter_mut().find(|m| m.0 == target) {
                        m.1 = s.message.clone();
                    }
                }
                None => out.push((s.timestamp, s.message.clone(), s.attachments.clone())),
            }
        }
        out.retain(|m| !self.deleted.contains(&(chat.to_string(), m.0)));
        out
    }
}
