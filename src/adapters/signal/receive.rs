//! One event from the stream in, at most one inbox row out. A `yes`/`no` reply or a reaction
//! that answers an open approval question of its chat is a press (`Approvals::answer_in_words`)
//! and never reaches the agent; a message's files are fetched from the daemon
//! (`getAttachment`, base64) into the media cache before the event is ingested, so the event
//! names bytes Herald holds; a file over `media.max_bytes` is not fetched, and the core
//! refuses it by its announced size.
//!
//! The stream has no acknowledgement: the inbox write is the only record, and it dedupes on
//! the message's author and timestamp, so an envelope seen again is harmless. A store failure
//! is the only `Err`; the stream loop retries the same event until it is in.
//!
//! Must not: log a message's text or a file's bytes, or answer someone off the allowlist.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;

use base64::Engine as _;
use serde_json::{json, Value};

use super::inbound::{self, Decision, FileRef, Inbound, Rules};
use super::outbound::say;
use super::rpc::SignalRpc;
use super::SIGNAL;
use crate::domain::{Attachment, MediaKind, MediaSource};
use crate::lanes::{Approvals, Ingest, WordReply};
use crate::media::{sha256_hex, MediaCache};
use crate::store::{InboxInsert, StoreError};

/// What the bot says to a message it cannot read.
pub const CANNOT_READ: &str =
    "I can't read that kind of message yet. Please send it as text, a photo or a file.";

pub struct Receiver {
    pub ingest: Ingest,
    pub approvals: Approvals,
    pub rpc: SignalRpc,
    pub account: String,
    pub free_response_groups: HashSet<String>,
    pub allowed: HashSet<String>,
    pub allow_all: bool,
    pub cache: MediaCache,
    pub max_bytes: u64,
}

/// What became of one event (for logs, metrics and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Ingested,
    Duplicate,
    Answered,
    Unreadable,
    Ignored,
    Malformed,
}

impl Received {
    fn as_str(self) -> &'static str {
        match self {
            Received::Ingested => "ingested",
            Received::Duplicate => "duplicate",
            Received::Answered => "answered",
            Received::Unreadable => "unreadable",
            Received::Ignored => "ignored",
            Received::Malformed => "malformed",
        }
    }
}

impl Receiver {
    /// `Err` only when the store could not take the event: the caller tries it again.
    pub async fn handle(&self, data: &str) -> Result<Received, StoreError> {
        let got = self.handle_inner(data).await;
        if let Ok(r) = &got {
            metrics::counter!("herald_signal_events_total", "outcome" => r.as_str()).increment(1);
        }
        got
    }

    async fn handle_inner(&self, data: &str) -> Result<Received, StoreError> {
        let Some(decision) = self.decide(data) else {
            return Ok(Received::Malformed);
        };
        match decision {
            Decision::Ignore(reason) => {
                tracing::debug!(reason, "signal event not for the agent");
                Ok(Received::Ignored)
            }
            Decision::React(r) => {
                let reply = WordReply {
                    platform: SIGNAL,
                    chat_id: &r.chat_id,
                    thread_id: None,
                    sender_id: &r.sender_id,
                    text: &r.emoji,
                    in_reply_to: Some(&r.target),
                };
                match self.approvals.answer_in_words(&reply).await {
                    Some(outcome) => {
                        say(&self.rpc, &r.chat_id, &outcome.text(), None).await;
                        Ok(Received::Answered)
                    }
                    None => Ok(Received::Ignored),
                }
            }
            Decision::Unreadable(ev) => {
                if !self.allowed(&ev.sender_id) {
                    return Ok(Received::Ignored);
                }
                // Recorded (never a turn), so a second sight of it is not answered twice.
                if let InboxInsert::Inserted(_) = self.ingest.ingest(&ev).await? {
                    tracing::info!(chat = %ev.chat_id, key = %ev.platform_message_id,
                        "a Signal message of a kind Herald cannot read; told the sender");
                    say(&self.rpc, &ev.chat_id, CANNOT_READ, None).await;
                }
                Ok(Received::Unreadable)
            }
            Decision::Ingest(inbound) => self.message(*inbound).await,
        }
    }

    async fn message(&self, mut inbound: Inbound) -> Result<Received, StoreError> {
        let ev = &inbound.event;
        if inbound.files.is_empty() {
            let reply = WordReply {
                platform: SIGNAL,
                chat_id: &ev.chat_id,
                thread_id: None,
                sender_id: &ev.sender_id,
                text: &ev.text,
                in_reply_to: inbound.quotes.as_deref(),
            };
            if let Some(outcome) = self.approvals.answer_in_words(&reply).await {
                say(&self.rpc, &ev.chat_id, &outcome.text(), None).await;
                return Ok(Received::Answered);
            }
        }
        let mut attachments = Vec::new();
        for f in &inbound.files {
            attachments.push(self.fetch(f, &inbound.source).await);
        }
        inbound.event.attachments = attachments;
        Ok(match self.ingest.ingest(&inbound.event).await? {
            InboxInsert::Inserted(_) => Received::Ingested,
            InboxInsert::Duplicate(_) => Received::Duplicate,
        })
    }

    fn allowed(&self, sender: &str) -> bool {
        self.allow_all || self.allowed.contains(sender)
    }

    /// Event data → decision, with no I/O; `None` (logged without the body) when it does not
    /// read, or when reading it panicked.
    fn decide(&self, data: &str) -> Option<Decision> {
        let rules = Rules {
            account: &self.account,
            uuid: None,
            free_response_groups: &self.free_response_groups,
            allowed: &self.allowed,
        };
        let run = || serde_json::from_str::<Value>(data).and_then(|v| inbound::decide(&v, &rules));
        // Unwind safety: deciding only reads its inputs.
        match std::panic::catch_unwind(AssertUnwindSafe(run)) {
            Ok(Ok(d)) => Some(d),
            Ok(Err(error)) => {
                tracing::warn!(error = %error, bytes = data.len(),
                    "skipping a Signal event that cannot be read");
                None
            }
            Err(_) => {
                tracing::error!(
                    bytes = data.len(),
                    "reading a Signal event panicked; skipped it (a bug: keep this log line)"
                );
                None
            }
        }
    }

    /// A file of the message as an attachment the core can read: fetched into the media cache,
    /// or (over the size limit, or not fetched) named by its announced size only.
    async fn fetch(&self, f: &FileRef, source: &(&'static str, String)) -> Attachment {
        let kind = f
            .mime
            .as_deref()
            .map_or(MediaKind::Document, MediaKind::from_mime);
        // Where no bytes are held the reference is the hash of the id, which the cache lacks:
        // the core reports such a file as too large (by its size) or as not available.
        let mut a = Attachment::new(kind, MediaSource::Cached(sha256_hex(f.id.as_bytes())));
        a.mime = f.mime.clone();
        a.name = f.name.clone().or_else(|| Some(f.id.clone()));
        a.size = f.size;
        if f.size.is_some_and(|s| s > self.max_bytes) {
            return a;
        }
        let params = json!({"id": f.id, source.0: source.1});
        let bytes = match self.rpc.call("getAttachment", params).await {
            Ok(result) => result
                .get("data")
                .and_then(Value::as_str)
                .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok()),
            Err(e) => {
                tracing::warn!(error = %e, "could not fetch a Signal attachment");
                None
            }
        };
        let Some(bytes) = bytes else {
            a.size = None;
            return a;
        };
        match self.cache.put(&bytes).await {
            Ok(sha) => {
                a.source = MediaSource::Cached(sha.clone());
                a.sha256 = Some(sha);
                a.size = Some(bytes.len() as u64);
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not keep a Signal attachment in the media cache");
                a.size = None;
            }
        }
        a
    }
}
