//! One webhook envelope in, its messages in the inbox, its taps answered, its statuses
//! recorded: the step behind the webhook route, which answers 200 only after `Ok`.
//!
//! A store failure is the only `Err` (Meta then redelivers the whole envelope, and what was
//! already written dedupes on its `wamid`). A tap is answered once per tap (a redelivered tap
//! is remembered for a while and not answered again); a message Herald cannot read is recorded
//! and answered politely, once.
//!
//! Must not: acknowledge anything itself, or log what people wrote.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::inbound::{self, Item, Status};
use super::outbound::WhatsAppOutbound;
use super::status::Statuses;
use super::window::heard_key;
use super::WHATSAPP;
use crate::domain::{MessageEvent, MessageKind, Origin};
use crate::hooks::Authorizer;
use crate::lanes::{Approvals, Ingest};
use crate::store::{InboxInsert, Store, StoreError};

/// What Herald answers a message type it cannot read yet.
pub const CANNOT_READ: &str =
    "Sorry, I can't read that kind of message yet. Could you send it as text, a photo or a document?";

/// How many recent taps are remembered against redelivery.
const TAPS_REMEMBERED: usize = 512;

pub struct Receiver {
    pub ingest: Ingest,
    pub approvals: Approvals,
    pub outbound: Arc<WhatsAppOutbound>,
    pub statuses: Statuses,
    pub api_url: String,
    /// Who may be answered: only they hear that a message could not be read.
    pub auth: Authorizer,
    pub store: Arc<dyn Store>,
    taps: Mutex<VecDeque<String>>,
}

/// What one envelope held, for logs and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub ingested: usize,
    pub duplicates: usize,
    pub presses: usize,
    pub unreadable: usize,
    pub statuses: usize,
}

/// What a receiver is built from.
pub struct Parts {
    pub ingest: Ingest,
    pub approvals: Approvals,
    pub outbound: Arc<WhatsAppOutbound>,
    pub statuses: Statuses,
    pub api_url: String,
    pub auth: Authorizer,
    pub store: Arc<dyn Store>,
}

impl Receiver {
    pub fn new(p: Parts) -> Receiver {
        Receiver {
            ingest: p.ingest,
            approvals: p.approvals,
            outbound: p.outbound,
            statuses: p.statuses,
            api_url: p.api_url,
            auth: p.auth,
            store: p.store,
            taps: Mutex::new(VecDeque::new()),
        }
    }

    /// `Err` only when the store could not take an event: the caller must not answer 200.
    pub async fn handle(&self, envelope: &Value) -> Result<Received, StoreError> {
        let items = match inbound::items(envelope, &self.api_url) {
            Ok(items) => items,
            Err(why) => {
                tracing::warn!(
                    reason = why,
                    "skipping a whatsapp webhook that does not read (answered 200: it never would)"
                );
                metrics::counter!("herald_whatsapp_events_total", "outcome" => "malformed")
                    .increment(1);
                return Ok(Received::default());
            }
        };
        let mut r = Received::default();
        for item in items {
            match item {
                Item::Ingest(ev) => {
                    let chat = ev.chat_id.clone();
                    let wamid = ev.platform_message_id.clone();
                    // Before the inbox: a redelivery after a failure here writes it again.
                    let now = chrono::Utc::now().timestamp().to_string();
                    self.store.kv_set(&heard_key(&chat), &now).await?;
                    match self.ingest.ingest(&ev).await? {
                        InboxInsert::Inserted(_) => r.ingested += 1,
                        InboxInsert::Duplicate(_) => r.duplicates += 1,
                    }
                    self.outbound.heard(&chat, &wamid);
                }
                Item::Press { press, wamid } => {
                    r.presses += 1;
                    if self.first_tap(&wamid) {
                        let outcome = self.approvals.press(&press).await;
                        // Told to the presser, quoting the tap; a stranger is not answered.
                        let who =
                            MessageEvent::text(WHATSAPP, &press.chat_id, &press.sender_id, "");
                        if self
                            .auth
                            .is_allowed_or_paired(&who, self.store.as_ref())
                            .await
                        {
                            self.outbound
                                .tell(&press.chat_id, Some(&wamid), &outcome.text())
                                .await;
                        }
                    }
                }
                Item::Unreadable { chat, wamid, what } => {
                    r.unreadable += 1;
                    self.unreadable(&chat, &wamid, &what).await?;
                }
                Item::Status(st) => {
                    r.statuses += 1;
                    self.status(&st).await?;
                }
            }
        }
        for (outcome, n) in [
            ("ingested", r.ingested),
            ("duplicate", r.duplicates),
            ("pressed", r.presses),
            ("unreadable", r.unreadable),
            ("status", r.statuses),
        ] {
            if n > 0 {
                metrics::counter!("herald_whatsapp_events_total", "outcome" => outcome)
                    .increment(n as u64);
            }
        }
        Ok(r)
    }

    /// Whether this tap is new (not a redelivery of one already answered).
    fn first_tap(&self, wamid: &str) -> bool {
        let mut taps = self.taps.lock().unwrap_or_else(|p| p.into_inner());
        if taps.iter().any(|t| t == wamid) {
            return false;
        }
        if taps.len() >= TAPS_REMEMBERED {
            taps.pop_front();
        }
        taps.push_back(wamid.to_string());
        true
    }

    /// Recorded as a service line (so a redelivery dedupes), then answered once, to an allowed
    /// person only.
    async fn unreadable(&self, chat: &str, wamid: &str, what: &str) -> Result<(), StoreError> {
        let mut ev = MessageEvent::text(
            WHATSAPP,
            chat,
            chat,
            &format!("(sent a {what} message Herald cannot read)"),
        );
        ev.platform_message_id = wamid.to_string();
        ev.reply_to = Some(wamid.to_string());
        ev.origin = Origin::person(MessageKind::Service);
        // Any message opens the person's 24-hour window (an answer to them may follow).
        let now = chrono::Utc::now().timestamp().to_string();
        self.store.kv_set(&heard_key(chat), &now).await?;
        let new = matches!(self.ingest.ingest(&ev).await?, InboxInsert::Inserted(_));
        if new
            && self
                .auth
                .is_allowed_or_paired(&ev, self.store.as_ref())
                .await
        {
            tracing::info!(
                kind = what,
                "a whatsapp message of a type Herald cannot read; told the person"
            );
            self.outbound.tell(chat, Some(wamid), CANNOT_READ).await;
        }
        Ok(())
    }

    async fn status(&self, st: &Status) -> Result<(), StoreError> {
        self.statuses.record(st).await
    }
}
