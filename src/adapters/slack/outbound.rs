//! Slack's side of delivery: one outbox row becomes one `chat.postMessage`, a preview is
//! edited with `chat.update` and removed with `chat.delete`.
//!
//! Exactly once, although Slack has no idempotency key: every message Herald posts carries
//! the outbox row's key in its `metadata` (`event_type: herald_outbox`). A row that was started
//! before (`attempts` > 0: a crash after Slack took it, or an answer we never read) is first
//! looked for in the channel's or thread's recent history (`include_all_metadata`); when it is
//! there, its ts is returned and nothing is posted again.
//!
//! Errors map once onto the sender's classes: 429 / `ratelimited` → `RetryAfter`; a refused
//! or revoked token → `Transient` (logged: an operator must act; the row waits, nothing is
//! lost); a channel the bot cannot post in → `Permanent`. This file must not retry on its own:
//! the sender owns retries.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{json, Value};

use super::api::{ApiError, SlackApi};
use super::mrkdwn::{escape, markdown_to_mrkdwn};
use super::SLACK;
use crate::adapters::split::{split_message, Measure};
use crate::delivery::{Ask, OutFile, Outbound, PreviewTarget, SendError};
use crate::domain::Platform;
use crate::store::OutboxRow;

/// The chunk a reply is split into: Slack takes 40,000 characters but recommends 4,000 for
/// readable messages (and truncates longer text in some clients).
pub const SLACK_CHUNK: usize = 4000;
/// The metadata event type that marks Herald's own posts.
pub const OUTBOX_EVENT_TYPE: &str = "herald_outbox";
/// `chat.update` is a Tier 3 method (about 50 a minute): one preview edit per message at most
/// this often; an edit sooner is skipped (the next one, or the final edit, carries its text).
pub const EDIT_INTERVAL: Duration = Duration::from_millis(1200);

pub struct SlackOutbound {
    pub(super) api: SlackApi,
    pub(super) token: String,
    /// When each preview message was last edited (pruned as previews end).
    edits: Mutex<HashMap<String, Instant>>,
}

impl SlackOutbound {
    pub fn new(api: SlackApi, token: String) -> SlackOutbound {
        SlackOutbound {
            api,
            token,
            edits: Mutex::new(HashMap::new()),
        }
    }

    /// One chat method with a JSON body that answers a message `ts`.
    pub(super) async fn post_ts(&self, method: &str, body: &Value) -> Result<String, SendError> {
        let answer: Value = self
            .api
            .post(method, &self.token, body)
            .await
            .map_err(|e| classify(&e))?;
        answer
            .get("ts")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| SendError::Transient(format!("slack {method}: no ts in the answer")))
    }

    fn message_body(row: &OutboxRow, text: String) -> Value {
        let mut body = json!({
            "channel": row.chat_id,
            "text": text,
            "mrkdwn": true,
            "unfurl_links": false,
            "unfurl_media": false,
            "metadata": outbox_metadata(&row.idem_key),
        });
        if let Some(t) = &row.thread_id {
            body["thread_ts"] = json!(t);
        }
        body
    }

    /// Whether this row may have been posted already (its first attempt did not end cleanly).
    fn maybe_posted(row: &OutboxRow) -> bool {
        row.attempts > 0
    }

    /// Replaces a preview's text; `Ok` for a skipped edit.
    async fn edit(&self, channel: &str, ts: &str, text: &str) -> Result<(), SendError> {
        {
            let mut edits = self.edits.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            if edits
                .get(ts)
                .is_some_and(|at| now.duration_since(*at) < EDIT_INTERVAL)
            {
                return Ok(());
            }
            edits.insert(ts.to_string(), now);
        }
        let body = json!({ "channel": channel, "ts": ts, "text": escape(text) });
        self.post_ts("chat.update", &body).await.map(|_| ())
    }

    fn forget(&self, ts: &str) {
        self.edits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(ts);
    }
}

/// `metadata` of a post: the outbox key, found again by `history::find_posted`.
pub fn outbox_metadata(key: &str) -> Value {
    json!({ "event_type": OUTBOX_EVENT_TYPE, "event_payload": { "key": key } })
}

#[async_trait]
impl Outbound for SlackOutbound {
    fn platform(&self) -> Platform {
        SLACK
    }

    fn split(&self, text: &str) -> Vec<String> {
        split_message(text, SLACK_CHUNK, Measure::Chars)
    }

    async fn send(&self, row: &OutboxRow) -> Result<String, SendError> {
        if Self::maybe_posted(row) {
            if let Some(ts) = self.find_posted(row).await? {
                tracing::info!(outbox_id = row.id, lane = %row.lane,
                    "slack already has this chunk (found by its outbox key); not posting again");
                metrics::counter!("herald_slack_resends_avoided_total").increment(1);
                return Ok(ts);
            }
        }
        let body = Self::message_body(row, markdown_to_mrkdwn(&row.text));
        self.post_ts("chat.postMessage", &body).await
    }

    async fn send_file(&self, row: &OutboxRow, file: &OutFile) -> Result<String, SendError> {
        self.upload(row, file).await
    }

    async fn ask(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        let mut body = json!({
            "channel": ask.chat_id,
            "text": escape(ask.text),
            "blocks": super::ask::question_blocks(ask),
        });
        if let Some(t) = ask.thread_id {
            body["thread_ts"] = json!(t);
        }
        self.post_ts("chat.postMessage", &body).await
    }

    async fn ask_closed(
        &self,
        chat_id: &str,
        _thread_id: Option<&str>,
        message_id: &str,
        text: &str,
    ) {
        // An empty `blocks` removes the buttons.
        let body =
            json!({ "channel": chat_id, "ts": message_id, "text": escape(text), "blocks": [] });
        if let Err(e) = self.post_ts("chat.update", &body).await {
            tracing::debug!(error = %e, "approval question not closed");
        }
    }

    fn previews(&self) -> bool {
        true
    }

    async fn preview_send(&self, to: &PreviewTarget<'_>, text: &str) -> Result<String, SendError> {
        let mut body = json!({ "channel": to.chat_id, "text": escape(text), "mrkdwn": false });
        if let Some(t) = to.thread_id {
            body["thread_ts"] = json!(t);
        }
        let ts = self.post_ts("chat.postMessage", &body).await?;
        self.edits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ts.clone(), Instant::now());
        Ok(ts)
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
        let body = json!({ "channel": to.chat_id, "ts": message_id });
        match self.post_ts("chat.delete", &body).await {
            Ok(_) => Ok(()),
            Err(SendError::Permanent(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn finalize(&self, row: &OutboxRow, message_id: &str) -> Result<String, SendError> {
        self.forget(message_id);
        let body = json!({
            "channel": row.chat_id,
            "ts": message_id,
            "text": markdown_to_mrkdwn(&row.text),
            "metadata": outbox_metadata(&row.idem_key),
        });
        match self.post_ts("chat.update", &body).await {
            Ok(_) => Ok(message_id.to_string()),
            // The preview is gone (deleted by someone): post the chunk instead.
            Err(SendError::Permanent(_)) => self.send(row).await,
            Err(e) => Err(e),
        }
    }
}

/// Slack's answers onto the sender's retry classes.
pub fn classify(e: &ApiError) -> SendError {
    match e {
        ApiError::RateLimited { after, .. } => SendError::RetryAfter(*after),
        ApiError::Unavailable { .. } | ApiError::Unreadable { .. } => {
            SendError::Transient(e.to_string())
        }
        ApiError::Refused { code, .. } => {
            if e.is_auth() {
                tracing::error!(error = %e, "slack refused the bot token (slack.bot_token); the message waits");
                return SendError::Transient(e.to_string());
            }
            match code.as_str() {
                "internal_error"
                | "fatal_error"
                | "service_unavailable"
                | "request_timeout"
                | "team_access_not_granted" => SendError::Transient(e.to_string()),
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
        let refused = |code: &str| ApiError::Refused {
            method: "chat.postMessage".into(),
            code: code.into(),
        };
        let cases = [
            (
                ApiError::RateLimited {
                    method: "chat.postMessage".into(),
                    after: Duration::from_secs(7),
                },
                "retry 7s",
            ),
            (refused("channel_not_found"), "permanent"),
            (refused("not_in_channel"), "permanent"),
            (refused("msg_too_long"), "permanent"),
            (refused("token_revoked"), "transient"),
            (refused("invalid_auth"), "transient"),
            (refused("internal_error"), "transient"),
            (
                ApiError::Unavailable {
                    method: "chat.update".into(),
                    detail: "timeout".into(),
                },
                "transient",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(classify(&err).class(), want, "{err}");
        }
    }

    #[test]
    fn replies_split_at_the_recommended_chunk() {
        let text = "word ".repeat(2000);
        let chunks = split_message(&text, SLACK_CHUNK, Measure::Chars);
        assert_eq!(chunks.len(), 3);
        assert!(chunks.iter().all(|c| c.chars().count() <= SLACK_CHUNK));
    }
}
