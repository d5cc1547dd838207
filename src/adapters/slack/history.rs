//! Finding a message Herald already posted, by the outbox key in its metadata: the check that
//! makes a resend after a crash harmless (see `outbound.rs`).
//!
//! A thread's replies (`conversations.replies`) or the channel's recent history
//! (`conversations.history`, from shortly before the row was made) are read with
//! `include_all_metadata=true`; Slack leaves metadata out otherwise.

use serde_json::Value;

use super::outbound::{classify, SlackOutbound, OUTBOX_EVENT_TYPE};
use crate::delivery::SendError;
use crate::store::OutboxRow;

/// How many recent messages are read; a row is looked for only right after its own attempt.
const LOOK_BACK: u32 = 200;

impl SlackOutbound {
    /// The ts of the message carrying `row`'s key, if Slack has one. A failed look-up is the
    /// row's error (the sender retries): posting blind could duplicate.
    pub(super) async fn find_posted(&self, row: &OutboxRow) -> Result<Option<String>, SendError> {
        let oldest = format!("{}.000000", (row.created_at / 1000 - 60).max(0));
        let (method, params) = match &row.thread_id {
            Some(thread) => (
                "conversations.replies",
                vec![
                    ("channel", row.chat_id.clone()),
                    ("ts", thread.clone()),
                    ("limit", LOOK_BACK.to_string()),
                    ("include_all_metadata", "true".to_string()),
                ],
            ),
            None => (
                "conversations.history",
                vec![
                    ("channel", row.chat_id.clone()),
                    ("oldest", oldest),
                    ("limit", LOOK_BACK.to_string()),
                    ("include_all_metadata", "true".to_string()),
                ],
            ),
        };
        let answer: Value = self
            .api
            .form(method, &self.token, &params)
            .await
            .map_err(|e| classify(&e))?;
        Ok(find_key(&answer, &row.idem_key))
    }
}

/// The ts of the first message in a history answer whose metadata carries `key`.
pub fn find_key(answer: &Value, key: &str) -> Option<String> {
    answer
        .get("messages")?
        .as_array()?
        .iter()
        .find(|m| {
            m.pointer("/metadata/event_type").and_then(Value::as_str) == Some(OUTBOX_EVENT_TYPE)
                && m.pointer("/metadata/event_payload/key")
                    .and_then(Value::as_str)
                    == Some(key)
        })
        .and_then(|m| m.get("ts")?.as_str().map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_only_our_key() {
        let answer = serde_json::json!({"ok": true, "messages": [
            {"ts": "3.0", "text": "no metadata"},
            {"ts": "2.0", "metadata": {"event_type": "other", "event_payload": {"key": "k1"}}},
            {"ts": "1.0", "metadata": {"event_type": "herald_outbox", "event_payload": {"key": "k1"}}},
        ]});
        assert_eq!(find_key(&answer, "k1").as_deref(), Some("1.0"));
        assert_eq!(find_key(&answer, "k2"), None);
        assert_eq!(find_key(&serde_json::json!({"ok": true}), "k1"), None);
    }
}
