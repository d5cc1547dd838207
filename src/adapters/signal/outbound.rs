//! Signal's side of delivery: one outbox row becomes one `send` (text, the person's message
//! quoted by the first chunk, or a file by path), a preview is edited with `editTimestamp` and
//! removed with `remoteDelete`, an approval question is asked in words.
//!
//! Exactly once: signal-cli has no idempotency key and no way to look up what was sent, so
//! the window between the daemon taking a message and our record of it cannot be closed, only
//! kept short: the answer's timestamp is written to the sent journal (`journal.rs`) the moment
//! it is read, before the sender's `mark_sent`, and a row tried again after an unclean attempt
//! is looked up there first. A kill while the answer is on its way back still sends the chunk
//! again after the restart (docs/platforms/signal.md; the conformance kill case measures it).
//!
//! Errors map once onto the sender's classes: -5 → `RetryAfter` (its `retryAfterSeconds`); a
//! user error (-1: unregistered recipient, unknown group) or a call the daemon does not
//! understand → `Permanent`; an unreachable daemon, an I/O error, an untrusted identity (an
//! operator must trust it) or anything unexpected → `Transient`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::{json, Map, Value};

use super::ids::{parse_message_key, to};
use super::journal::Journal;
use super::rpc::{sent_timestamp, RpcError, SignalRpc};
use super::spec::SIGNAL_CHUNK;
use super::SIGNAL;
use crate::adapters::split::{split_message, Measure};
use crate::delivery::{Ask, OutFile, Outbound, PreviewTarget, SendError};
use crate::domain::Platform;
use crate::lanes::question_in_words;
use crate::store::OutboxRow;

/// Preview edits of one message at most (Signal's apps stop showing edits of a message after
/// a handful; the final edit comes on top).
pub const MAX_PREVIEW_EDITS: u32 = 8;

pub struct SignalOutbound {
    pub(super) rpc: SignalRpc,
    /// Where files are written for the daemon to read.
    pub(super) files_dir: PathBuf,
    edits_on: bool,
    journal: Journal,
    /// Preview edits made per message (pruned as previews end).
    edits: Mutex<HashMap<String, u32>>,
}

impl SignalOutbound {
    pub fn new(
        rpc: SignalRpc,
        files_dir: PathBuf,
        edits_on: bool,
        journal: Journal,
    ) -> SignalOutbound {
        SignalOutbound {
            rpc,
            files_dir,
            edits_on,
            journal,
            edits: Mutex::new(HashMap::new()),
        }
    }

    /// `send` with `params` laid over the chat's address; the new message's timestamp.
    async fn send_in(&self, chat_id: &str, params: Value) -> Result<String, SendError> {
        let mut body = address(chat_id);
        if let Value::Object(extra) = params {
            body.extend(extra);
        }
        let result = self
            .rpc
            .call("send", Value::Object(body))
            .await
            .map_err(|e| classify(&e))?;
        sent_timestamp("send", &result)
            .map(|ts| ts.to_string())
            .map_err(|e| classify(&e))
    }

    /// The timestamp of a row an unclean attempt already got out, from the journal.
    fn already_sent(&self, row: &OutboxRow) -> Option<String> {
        if row.attempts == 0 {
            return None;
        }
        let ts = self.journal.find(&row.idem_key)?;
        tracing::info!(outbox_id = row.id, lane = %row.lane,
            "signal-cli took this chunk before (found in the sent journal); not sending again");
        metrics::counter!("herald_signal_resends_avoided_total").increment(1);
        Some(ts)
    }

    /// `send_in` for an outbox row: written down in the journal as soon as it is answered.
    async fn send_row(&self, row: &OutboxRow, params: Value) -> Result<String, SendError> {
        let ts = self.send_in(&row.chat_id, params).await?;
        self.journal.record(&row.idem_key, &ts);
        Ok(ts)
    }

    fn edit_count(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.edits.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The `recipient` or `groupId` parameter of a chat.
fn address(chat_id: &str) -> Map<String, Value> {
    let to = to(chat_id);
    let (key, value) = to.param();
    let mut m = Map::new();
    m.insert(key.to_string(), json!(value));
    m
}

/// The quote of the message `key` (`<author>/<timestamp>`), as `send` takes it.
fn quote(key: Option<&str>) -> Value {
    match key.and_then(parse_message_key) {
        Some((author, ts)) => json!({"quoteTimestamp": ts, "quoteAuthor": author}),
        None => json!({}),
    }
}

/// Sends `text` to a chat outside the outbox (a press's answer, a refusal of what cannot be
/// read), best effort: a failure is logged.
pub async fn say(rpc: &SignalRpc, chat_id: &str, text: &str, quoting: Option<&str>) {
    let mut body = address(chat_id);
    body.insert("message".into(), json!(text));
    if let Value::Object(q) = quote(quoting) {
        body.extend(q);
    }
    if let Err(e) = rpc.call("send", Value::Object(body)).await {
        tracing::warn!(error = %e, "could not answer on Signal");
    }
}

#[async_trait]
impl Outbound for SignalOutbound {
    fn platform(&self) -> Platform {
        SIGNAL
    }

    fn split(&self, text: &str) -> Vec<String> {
        split_message(text, SIGNAL_CHUNK, Measure::Chars)
    }

    async fn send(&self, row: &OutboxRow) -> Result<String, SendError> {
        if let Some(ts) = self.already_sent(row) {
            return Ok(ts);
        }
        let mut params = json!({"message": row.text});
        if row.chunk_index == 0 {
            if let Value::Object(q) = quote(row.reply_to.as_deref()) {
                params.as_object_mut().expect("an object").extend(q);
            }
        }
        self.send_row(row, params).await
    }

    async fn send_file(&self, row: &OutboxRow, file: &OutFile) -> Result<String, SendError> {
        if let Some(ts) = self.already_sent(row) {
            return Ok(ts);
        }
        let path = super::files_out::write(&self.files_dir, row.id, file)
            .await
            .map_err(|e| {
                SendError::Transient(format!("cannot write the file for signal-cli: {e}"))
            })?;
        let params = json!({"message": "", "attachments": [path.to_string_lossy()]});
        let sent = self.send_row(row, params).await;
        super::files_out::remove(&path).await;
        sent
    }

    async fn typing(&self, chat_id: &str, _thread_id: Option<&str>) {
        if let Err(e) = self
            .rpc
            .call("sendTyping", Value::Object(address(chat_id)))
            .await
        {
            tracing::debug!(error = %e, "typing indicator not sent");
        }
    }

    async fn ask(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        let params = json!({"message": question_in_words(ask.text)});
        self.send_in(ask.chat_id, params).await
    }

    async fn ask_closed(
        &self,
        chat_id: &str,
        _thread_id: Option<&str>,
        message_id: &str,
        text: &str,
    ) {
        // The question is edited into its outcome, as a button platform replaces its buttons.
        let Ok(ts) = message_id.parse::<u64>() else {
            return;
        };
        if !self.edits_on {
            return;
        }
        let params = json!({"message": text, "editTimestamp": ts});
        if let Err(e) = self.send_in(chat_id, params).await {
            tracing::debug!(error = %e, "approval question not closed");
        }
    }

    fn previews(&self) -> bool {
        self.edits_on
    }

    async fn preview_send(&self, to: &PreviewTarget<'_>, text: &str) -> Result<String, SendError> {
        // The first preview message quotes the person's message, as a reply's first chunk does.
        let mut params = json!({"message": text});
        if let Value::Object(q) = quote(to.reply_to) {
            params.as_object_mut().expect("an object").extend(q);
        }
        let ts = self.send_in(to.chat_id, params).await?;
        self.edit_count().insert(ts.clone(), 0);
        Ok(ts)
    }

    async fn preview_edit(
        &self,
        to: &PreviewTarget<'_>,
        message_id: &str,
        text: &str,
    ) -> Result<(), SendError> {
        {
            let mut edits = self.edit_count();
            let n = edits.entry(message_id.to_string()).or_default();
            if *n >= MAX_PREVIEW_EDITS {
                return Ok(());
            }
            *n += 1;
        }
        let ts = edit_target(message_id)?;
        let params = json!({"message": text, "editTimestamp": ts});
        self.send_in(to.chat_id, params).await.map(|_| ())
    }

    async fn preview_delete(
        &self,
        to: &PreviewTarget<'_>,
        message_id: &str,
    ) -> Result<(), SendError> {
        self.edit_count().remove(message_id);
        let mut body = address(to.chat_id);
        body.insert("targetTimestamp".into(), json!(edit_target(message_id)?));
        match self.rpc.call("remoteDelete", Value::Object(body)).await {
            Ok(_) => Ok(()),
            Err(e) => match classify(&e) {
                SendError::Permanent(_) => Ok(()),
                other => Err(other),
            },
        }
    }

    async fn finalize(&self, row: &OutboxRow, message_id: &str) -> Result<String, SendError> {
        self.edit_count().remove(message_id);
        let ts = edit_target(message_id)?;
        let params = json!({"message": row.text, "editTimestamp": ts});
        match self.send_in(&row.chat_id, params).await {
            // The message keeps the timestamp it was sent with; later edits name that one.
            Ok(_) => Ok(message_id.to_string()),
            Err(SendError::Permanent(_)) => self.send(row).await,
            Err(e) => Err(e),
        }
    }
}

fn edit_target(message_id: &str) -> Result<u64, SendError> {
    message_id
        .parse()
        .map_err(|_| SendError::Permanent(format!("not a Signal timestamp: {message_id:?}")))
}

/// signal-cli's answers onto the sender's retry classes.
pub fn classify(e: &RpcError) -> SendError {
    match e {
        RpcError::RateLimited { after, .. } => SendError::RetryAfter(*after),
        RpcError::Unavailable { .. } | RpcError::Unreadable { .. } => {
            SendError::Transient(e.to_string())
        }
        RpcError::Refused { code, .. } => match code {
            -4 => {
                tracing::error!(error = %e, "a recipient's safety number changed; trust it with signal-cli (the message waits)");
                SendError::Transient(e.to_string())
            }
            -1 | -32600 | -32601 | -32602 => SendError::Permanent(e.to_string()),
            _ => SendError::Transient(e.to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn error_classification_table() {
        let refused = |code: i64| RpcError::Refused {
            method: "send".into(),
            code,
            message: "m".into(),
        };
        let cases = [
            (
                RpcError::RateLimited {
                    method: "send".into(),
                    after: Duration::from_secs(7),
                },
                "retry 7s",
            ),
            (refused(-1), "permanent"),
            (refused(-32601), "permanent"),
            (refused(-3), "transient"),
            (refused(-4), "transient"),
            (refused(-32603), "transient"),
            (
                RpcError::Unavailable {
                    method: "send".into(),
                    detail: "connection refused".into(),
                },
                "transient",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(classify(&err).class(), want, "{err}");
        }
    }

    #[test]
    fn quotes_and_addresses() {
        assert_eq!(
            quote(Some("+4915123456789/1700000000123")),
            json!({"quoteTimestamp": 1700000000123u64, "quoteAuthor": "+4915123456789"})
        );
        assert_eq!(quote(Some("not a key")), json!({}));
        assert_eq!(
            Value::Object(address("4915123456789")),
            json!({"recipient": "+4915123456789"})
        );
        assert_eq!(
            Value::Object(address("group:Pmpi-EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI")),
            json!({"groupId": "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI="})
        );
    }
}
