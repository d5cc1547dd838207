//! Matrix's side of delivery: one outbox row becomes one `m.room.message` (encrypted by the SDK
//! in an encrypted room), a preview is edited with `m.replace` and removed by redaction.
//!
//! Exactly once by the protocol: every send carries a transaction id derived from the outbox
//! row's key (`txn_id`), and the homeserver answers a repeated transaction with the event it
//! made the first time, so a row resent after a crash is not shown twice. The final edit of a
//! streamed answer carries the row's transaction id the same way.
//!
//! Errors map once onto the sender's classes: `M_LIMIT_EXCEEDED` / 429 → `RetryAfter`; a room
//! the bot left or was removed from → `Permanent`, naming it; network trouble, 5xx and a
//! refused token (logged: an operator must act) → `Transient`. This file must not retry.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use matrix_sdk::attachment::AttachmentConfig;
use matrix_sdk::ruma::{OwnedTransactionId, RoomId};
use matrix_sdk::{Client, Room, RoomState};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::format::markdown_to_html;
use super::MATRIX;
use crate::adapters::split::{split_message, Measure};
use crate::delivery::{Ask, OutFile, Outbound, PreviewTarget, SendError};
use crate::domain::Platform;
use crate::lanes::question_in_words;
use crate::store::OutboxRow;

/// The chunk a reply is split into: Synapse takes events up to 65,536 bytes (body, HTML twin
/// and, encrypted, base64 on top), but a chat reads better in messages of a screen or two, so
/// replies are split at 4,000 characters.
pub const MATRIX_CHUNK: usize = 4_000;
/// One preview edit per message at most this often (the pace: one edit a second).
pub const EDIT_INTERVAL: Duration = Duration::from_secs(1);

/// The client, once the adapter has logged in (sends wait as `Transient` until then).
pub type ClientSlot = Arc<OnceLock<Client>>;

pub struct MatrixOutbound {
    client: ClientSlot,
    /// When each preview message was last edited (pruned as previews end).
    edits: Mutex<HashMap<String, Instant>>,
}

impl MatrixOutbound {
    pub fn new(client: ClientSlot) -> MatrixOutbound {
        MatrixOutbound {
            client,
            edits: Mutex::new(HashMap::new()),
        }
    }

    /// The joined room, or why not.
    fn room(&self, room_id: &str) -> Result<Room, SendError> {
        let client = self
            .client
            .get()
            .ok_or_else(|| SendError::Transient("matrix: not logged in yet".into()))?;
        let id = RoomId::parse(room_id)
            .map_err(|_| SendError::Permanent(format!("matrix: {room_id:?} is not a room id")))?;
        let Some(room) = client.get_room(&id) else {
            return Err(SendError::Permanent(format!(
                "matrix: the bot is not in room {room_id} (never joined, or removed)"
            )));
        };
        match room.state() {
            RoomState::Joined => Ok(room),
            RoomState::Left | RoomState::Banned => Err(SendError::Permanent(format!(
                "matrix: the bot was removed from room {room_id} (or left it); not sending there"
            ))),
            other => Err(SendError::Permanent(format!(
                "matrix: the bot is not joined to room {room_id} ({other:?})"
            ))),
        }
    }

    async fn edit(&self, room_id: &str, event_id: &str, text: &str) -> Result<(), SendError> {
        {
            let mut edits = self.edits.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            if edits
                .get(event_id)
                .is_some_and(|at| now.duration_since(*at) < EDIT_INTERVAL)
            {
                return Ok(());
            }
            edits.insert(event_id.to_string(), now);
        }
        let room = self.room(room_id)?;
        let content = replacement(event_id, message_content(text, None, false));
        send_raw(&room, content, None).await.map(|_| ())
    }

    fn forget(&self, event_id: &str) {
        self.edits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(event_id);
    }
}

/// The transaction id of everything sent for `key`: its digest, so it is the same after a
/// restart and never holds the key's own characters.
pub fn txn_id(key: &str) -> OwnedTransactionId {
    let digest = hex::encode(Sha256::digest(key.as_bytes()));
    OwnedTransactionId::from(format!("herald-{}", &digest[..40]))
}

/// `m.room.message` content: the Markdown as `body`, its sanitised HTML as `formatted_body`
/// when it has any, in the thread when there is one.
pub fn message_content(text: &str, thread: Option<&str>, formatted: bool) -> Value {
    let mut content = json!({ "msgtype": "m.text", "body": text });
    if formatted {
        if let Some(html) = markdown_to_html(text) {
            content["format"] = json!("org.matrix.custom.html");
            content["formatted_body"] = json!(html);
        }
    }
    if let Some(root) = thread {
        content["m.relates_to"] = json!({
            "rel_type": "m.thread",
            "event_id": root,
            "is_falling_back": true,
            "m.in_reply_to": { "event_id": root },
        });
    }
    content
}

/// An edit of `event_id` into `new`: `m.new_content` for clients that apply edits, a `* `
/// body for those that do not.
pub fn replacement(event_id: &str, new: Value) -> Value {
    let mut content = new.clone();
    if let Some(body) = new.get("body").and_then(Value::as_str) {
        content["body"] = json!(format!("* {body}"));
    }
    if let Some(map) = content.as_object_mut() {
        map.remove("formatted_body");
        map.remove("format");
    }
    let mut inner = new;
    if let Some(map) = inner.as_object_mut() {
        map.remove("m.relates_to");
    }
    content["m.new_content"] = inner;
    content["m.relates_to"] = json!({ "rel_type": "m.replace", "event_id": event_id });
    content
}

/// Sends one `m.room.message`; returns its event id.
async fn send_raw(
    room: &Room,
    content: Value,
    txn: Option<OwnedTransactionId>,
) -> Result<String, SendError> {
    let mut send = room.send_raw("m.room.message", content);
    if let Some(txn) = &txn {
        send = send.with_transaction_id(txn);
    }
    send.await
        .map(|r| r.response.event_id.to_string())
        .map_err(|e| classify(&e))
}

/// A plain notice (approval outcomes, the undecryptable-event reply), once per `key`.
pub async fn notice(
    room: &Room,
    thread: Option<&str>,
    key: &str,
    text: &str,
) -> Result<String, SendError> {
    let mut content = message_content(text, thread, false);
    content["msgtype"] = json!("m.notice");
    send_raw(room, content, Some(txn_id(key))).await
}

/// The SDK's error onto the sender's retry classes.
pub fn classify(e: &matrix_sdk::Error) -> SendError {
    use matrix_sdk::ruma::api::error::{ErrorKind, LimitExceededErrorData, RetryAfter};
    if let Some(kind) = e.client_api_error_kind() {
        match kind {
            ErrorKind::LimitExceeded(LimitExceededErrorData { retry_after, .. }) => {
                let wait = match retry_after {
                    Some(RetryAfter::Delay(d)) => *d,
                    Some(RetryAfter::DateTime(at)) => at
                        .duration_since(std::time::SystemTime::now())
                        .unwrap_or_default(),
                    None => Duration::from_secs(1),
                };
                return SendError::RetryAfter(wait);
            }
            ErrorKind::UnknownToken(_) | ErrorKind::MissingToken => {
                tracing::error!(error = %e, "matrix refused the bot's token; the message waits");
                return SendError::Transient(e.to_string());
            }
            ErrorKind::Forbidden => return SendError::Permanent(e.to_string()),
            ErrorKind::TooLarge => return SendError::Permanent(e.to_string()),
            _ => {}
        }
    }
    match e {
        matrix_sdk::Error::WrongRoomState(_) => SendError::Permanent(e.to_string()),
        _ => SendError::Transient(e.to_string()),
    }
}

#[async_trait]
impl Outbound for MatrixOutbound {
    fn platform(&self) -> Platform {
        MATRIX
    }

    fn split(&self, text: &str) -> Vec<String> {
        split_message(text, MATRIX_CHUNK, Measure::Chars)
    }

    async fn send(&self, row: &OutboxRow) -> Result<String, SendError> {
        let room = self.room(&row.chat_id)?;
        let content = message_content(&row.text, row.thread_id.as_deref(), true);
        send_raw(&room, content, Some(txn_id(&row.idem_key))).await
    }

    async fn send_file(&self, row: &OutboxRow, file: &OutFile) -> Result<String, SendError> {
        let room = self.room(&row.chat_id)?;
        let mime: mime::Mime = file.mime.parse().unwrap_or(mime::APPLICATION_OCTET_STREAM);
        let name = if file.name.trim().is_empty() {
            "file".to_string()
        } else {
            file.name.clone()
        };
        let config = AttachmentConfig::new().txn_id(txn_id(&row.idem_key));
        room.send_attachment(name, &mime, file.data.clone(), config)
            .await
            .map(|r| r.event_id.to_string())
            .map_err(|e| classify(&e))
    }

    async fn typing(&self, chat_id: &str, _thread_id: Option<&str>) {
        if let Ok(room) = self.room(chat_id) {
            let _ = room.typing_notice(true).await;
        }
    }

    async fn ask(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        let room = self.room(ask.chat_id)?;
        let content = message_content(&question_in_words(ask.text), ask.thread_id, false);
        let key = format!("ask:{}", ask.approval_id);
        send_raw(&room, content, Some(txn_id(&key))).await
    }

    fn previews(&self) -> bool {
        true
    }

    async fn preview_send(&self, to: &PreviewTarget<'_>, text: &str) -> Result<String, SendError> {
        let room = self.room(to.chat_id)?;
        let content = message_content(text, to.thread_id, false);
        let id = send_raw(&room, content, None).await?;
        self.edits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), Instant::now());
        Ok(id)
    }

    async fn preview_edit(
        &self,
        to: &PreviewTarget<'_>,
        message_id: &str,
        text: &str,
    ) -> Result<(), SendError> {
        self.edit(to.chat_id, message_id, text).await
    }

    async fn preview_delete(
        &self,
        to: &PreviewTarget<'_>,
        message_id: &str,
    ) -> Result<(), SendError> {
        self.forget(message_id);
        let room = self.room(to.chat_id)?;
        let Ok(id) = matrix_sdk::ruma::EventId::parse(message_id) else {
            return Ok(());
        };
        match room.redact(&id, None, None).await {
            Ok(_) => Ok(()),
            Err(e) => match classify(&matrix_sdk::Error::Http(Box::new(e))) {
                SendError::Permanent(_) => Ok(()),
                other => Err(other),
            },
        }
    }

    async fn finalize(&self, row: &OutboxRow, message_id: &str) -> Result<String, SendError> {
        self.forget(message_id);
        let room = self.room(&row.chat_id)?;
        let new = message_content(&row.text, None, true);
        let content = replacement(message_id, new);
        send_raw(&room, content, Some(txn_id(&row.idem_key))).await?;
        Ok(message_id.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_ids_are_stable_and_opaque() {
        let a = txn_id("outbox:lane:42:0");
        assert_eq!(a, txn_id("outbox:lane:42:0"));
        assert_ne!(a, txn_id("outbox:lane:42:1"));
        assert!(!a.as_str().contains("lane"), "{a}");
    }

    #[test]
    fn content_has_body_html_and_thread() {
        let c = message_content("**hi**", Some("$root"), true);
        assert_eq!(c["body"], "**hi**");
        assert_eq!(c["format"], "org.matrix.custom.html");
        assert!(c["formatted_body"]
            .as_str()
            .unwrap()
            .contains("<strong>hi</strong>"));
        assert_eq!(c["m.relates_to"]["rel_type"], "m.thread");
        assert_eq!(c["m.relates_to"]["event_id"], "$root");
        let plain = message_content("reply to: hi", None, true);
        assert!(plain.get("formatted_body").is_none(), "{plain}");
    }

    #[test]
    fn an_edit_carries_the_new_content() {
        let e = replacement("$p", message_content("**final**", None, true));
        assert_eq!(e["m.relates_to"]["rel_type"], "m.replace");
        assert_eq!(e["m.relates_to"]["event_id"], "$p");
        assert_eq!(e["body"], "* **final**");
        assert_eq!(e["m.new_content"]["body"], "**final**");
        assert!(e["m.new_content"]["formatted_body"].is_string());
    }
}
