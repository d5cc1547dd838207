//! WhatsApp's side of delivery: one outbox row becomes one `POST /{phone-number-id}/messages`
//! (text, or a file uploaded first and sent by its media id), an approval question becomes an
//! interactive message with two reply buttons, and a running turn shows the person a read
//! receipt with the typing indicator.
//!
//! WhatsApp has no edits (no previews: a streamed answer arrives whole) and no idempotency key.
//! Every send carries the outbox key as `biz_opaque_callback_data`, which Meta echoes in the
//! message's status callbacks: `status.rs` records the `wamid` against the row from the `sent`
//! callback, so a crash between Meta's acceptance and `mark_sent` leaves the row already marked
//! once the callback is redelivered to the restarted daemon (see docs/platforms/whatsapp.md).
//!
//! The 24-hour rule: a row that answers no message of the person (a cron brief, a
//! `send_message`) to someone who has not written for 24 hours goes out as the configured
//! template (`window.rs`), or fails at once with the reason.
//!
//! Must not: retry on its own (the sender owns retries), or log a message's text.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{json, Value};

use super::api::{code, ApiError, GraphApi};
use super::spec::MAX_TEXT;
use super::window::Window;
use super::WHATSAPP;
use crate::adapters::split::{split_message, Measure};
use crate::delivery::{approval_button_data, Ask, OutFile, Outbound, SendError};
use crate::domain::Platform;
use crate::store::OutboxRow;

/// The typing indicator lasts 25 s or until the reply: it is renewed at most this often.
const TYPING_EVERY: Duration = Duration::from_secs(20);
/// An interactive message's body holds at most 1,024 characters.
const BUTTON_BODY: usize = 1024;

pub struct WhatsAppOutbound {
    pub(super) api: GraphApi,
    pub(super) phone: String,
    pub(super) window: Window,
    /// Each chat's latest message from the person (`wamid`), for the read receipt.
    heard: Mutex<HashMap<String, String>>,
    /// When the typing indicator was last shown for a message.
    typing: Mutex<HashMap<String, Instant>>,
}

impl WhatsAppOutbound {
    pub fn new(api: GraphApi, phone: String, window: Window) -> WhatsAppOutbound {
        WhatsAppOutbound {
            api,
            phone,
            window,
            heard: Mutex::new(HashMap::new()),
            typing: Mutex::new(HashMap::new()),
        }
    }

    /// Notes the person's latest message in `chat` (the receiver calls it after the inbox).
    pub fn heard(&self, chat: &str, wamid: &str) {
        lock(&self.heard).insert(chat.to_string(), wamid.to_string());
    }

    /// One message body to `to`, sent; returns its `wamid`.
    pub(super) async fn message(&self, to: &str, mut body: Value) -> Result<String, SendError> {
        body["messaging_product"] = json!("whatsapp");
        body["recipient_type"] = json!("individual");
        body["to"] = json!(to);
        let answer = self
            .api
            .post(&format!("{}/messages", self.phone), &body)
            .await
            .map_err(|e| classify(&e))?;
        answer
            .pointer("/messages/0/id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| {
                SendError::Transient("whatsapp messages: no message id in the answer".into())
            })
    }

    /// A short text outside the outbox (an approval tap's outcome, "I can't read that"), best
    /// effort: quoting `quote` when given.
    pub async fn tell(&self, to: &str, quote: Option<&str>, text: &str) {
        let mut body = json!({"type": "text", "text": {"preview_url": false, "body": text}});
        if let Some(q) = quote {
            body["context"] = json!({ "message_id": q });
        }
        if let Err(e) = self.message(to, body).await {
            tracing::debug!(error = %e, "could not tell a whatsapp person an outcome");
        }
    }

    /// The row's text as a text message, or as the brief template outside the 24-hour window.
    async fn text(&self, row: &OutboxRow) -> Result<String, SendError> {
        let mut body = match self.window.outside(row).await? {
            None => json!({"type": "text", "text": {"preview_url": false, "body": row.text}}),
            Some(template) => template.body(&row.text),
        };
        body["biz_opaque_callback_data"] = json!(row.idem_key);
        if let Some(q) = row.reply_to.as_deref().filter(|q| q.starts_with("wamid.")) {
            body["context"] = json!({ "message_id": q });
        }
        self.message(&row.chat_id, body).await
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl Outbound for WhatsAppOutbound {
    fn platform(&self) -> Platform {
        WHATSAPP
    }

    fn split(&self, text: &str) -> Vec<String> {
        split_message(text, MAX_TEXT, Measure::Chars)
    }

    async fn send(&self, row: &OutboxRow) -> Result<String, SendError> {
        self.text(row).await
    }

    /// Uploads the bytes (`POST /{phone-number-id}/media`), then sends the media id: an image
    /// as an image, anything else as a document with its name.
    async fn send_file(&self, row: &OutboxRow, file: &OutFile) -> Result<String, SendError> {
        let name = if file.name.trim().is_empty() {
            "file".to_string()
        } else {
            file.name.clone()
        };
        let id = self
            .api
            .upload(&self.phone, &name, &file.mime, file.data.clone())
            .await
            .map_err(|e| classify(&e))?;
        let mut body = if file.is_image() {
            json!({"type": "image", "image": {"id": id}})
        } else {
            json!({"type": "document", "document": {"id": id, "filename": name}})
        };
        body["biz_opaque_callback_data"] = json!(row.idem_key);
        self.message(&row.chat_id, body).await
    }

    async fn typing(&self, chat_id: &str, _thread_id: Option<&str>) {
        let Some(wamid) = lock(&self.heard).get(chat_id).cloned() else {
            return;
        };
        {
            let mut shown = lock(&self.typing);
            let now = Instant::now();
            if shown
                .get(&wamid)
                .is_some_and(|at| now.duration_since(*at) < TYPING_EVERY)
            {
                return;
            }
            shown.retain(|_, at| now.duration_since(*at) < TYPING_EVERY);
            shown.insert(wamid.clone(), now);
        }
        let body = json!({
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": wamid,
            "typing_indicator": {"type": "text"},
        });
        if let Err(e) = self
            .api
            .post(&format!("{}/messages", self.phone), &body)
            .await
        {
            tracing::debug!(error = %e, "whatsapp read receipt / typing indicator not shown");
        }
    }

    async fn ask(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        let mut text: String = ask.text.chars().take(BUTTON_BODY).collect();
        if text.chars().count() < ask.text.chars().count() {
            text.pop();
            text.push('…');
        }
        let button =
            |id: String, title: &str| json!({"type": "reply", "reply": {"id": id, "title": title}});
        let body = json!({
            "type": "interactive",
            "interactive": {
                "type": "button",
                "body": {"text": text},
                "action": {"buttons": [
                    button(approval_button_data(ask.approval_id, true), "Approve"),
                    button(approval_button_data(ask.approval_id, false), "Deny"),
                ]},
            },
        });
        self.message(ask.chat_id, body).await
    }
}

/// Graph's answers onto the sender's retry classes.
pub fn classify(e: &ApiError) -> SendError {
    match e {
        ApiError::RateLimited { after, .. } => SendError::RetryAfter(*after),
        ApiError::Unavailable { .. } => SendError::Transient(e.to_string()),
        ApiError::Refused { code: c, .. } => {
            if e.is_auth() {
                tracing::error!(error = %e, "whatsapp refused the access token (whatsapp.access_token); the message waits");
                return SendError::Transient(e.to_string());
            }
            match *c {
                code::REENGAGEMENT => SendError::Permanent(format!(
                    "{e}: more than 24 hours since the person last wrote, so WhatsApp takes only a template (set whatsapp.brief_template)"
                )),
                c if code::TEMPORARY.contains(&c) || c == 131016 => {
                    SendError::Transient(e.to_string())
                }
                _ => SendError::Permanent(e.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_classification_table() {
        let refused = |c: i64| ApiError::Refused {
            call: "messages".into(),
            code: c,
            message: "m".into(),
        };
        let cases = [
            (
                ApiError::RateLimited {
                    call: "messages".into(),
                    code: code::RATE_LIMIT,
                    after: Duration::from_secs(3),
                },
                "retry 3s",
            ),
            (refused(code::INVALID_TOKEN), "transient"),
            (refused(code::INVALID_PARAMETER), "permanent"),
            (refused(code::REENGAGEMENT), "permanent"),
            (refused(131000), "transient"),
            (
                ApiError::Unavailable {
                    call: "messages".into(),
                    detail: "timeout".into(),
                },
                "transient",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(classify(&err).class(), want, "{err}");
        }
        let SendError::Permanent(why) = classify(&refused(code::REENGAGEMENT)) else {
            panic!("permanent")
        };
        assert!(
            why.contains("24 hours") && why.contains("brief_template"),
            "{why}"
        );
    }

    #[test]
    fn replies_split_at_4096() {
        let text = "word ".repeat(2000);
        let chunks = split_message(&text, MAX_TEXT, Measure::Chars);
        assert_eq!(chunks.len(), 3);
        assert!(chunks.iter().all(|c| c.chars().count() <= MAX_TEXT));
    }
}
