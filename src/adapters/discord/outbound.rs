//! Discord's side of delivery: one outbox row becomes one channel message.
//!
//! It exists so the outbox sender can stay platform-blind: this file decides how a chunk is
//! posted (thread or channel, reply reference, allowed mentions) and how Discord's failures map
//! onto `SendError`. It must not retry on its own: the sender owns retries, and a row it marked
//! sent is never handed here again, so a retry here could only add duplicates.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serenity::all::{
    Builder, ChannelId, CreateAllowedMentions, CreateAttachment, CreateInteractionResponseFollowup,
    CreateMessage, EditInteractionResponse, EditMessage, Http, HttpError, MessageId,
    MessageReference, MessageReferenceKind,
};

use crate::adapters::split::{split_message, Measure, DISCORD_LIMIT};
use crate::delivery::{Ask, OutFile, Outbound, PreviewTarget, SendError};
use crate::domain::Platform;
use crate::store::OutboxRow;

pub struct DiscordOutbound {
    pub(super) http: Arc<Http>,
    /// Used when a 429 reaches us without a readable `retry_after` (proxy mode, see the fake).
    pub(super) rate_limit_wait: Duration,
    /// Deferred slash commands: their answer edits the deferred response.
    pub(super) interactions: Arc<super::interactions::InteractionTokens>,
}

/// What the agent's text may ping: nobody by role, no `@everyone`/`@here`, no user named in the
/// text; only the author of the message we reply to, as a normal reply would.
pub(super) fn allowed_mentions(replying: bool) -> CreateAllowedMentions {
    CreateAllowedMentions::new()
        .everyone(false)
        .empty_users()
        .empty_roles()
        .replied_user(replying)
}

/// The message a chunk replies to. Only the first chunk replies, and only to a real message id
/// (an interaction-born event carries `interaction:<id>`, which is no message).
pub(super) fn reply_target(row: &OutboxRow) -> Option<MessageId> {
    if row.chunk_index != 0 {
        return None;
    }
    row.reply_to
        .as_deref()?
        .parse::<u64>()
        .ok()
        .filter(|id| *id != 0)
        .map(MessageId::new)
}

/// Where a row goes: the thread when the lane is a thread, else the channel.
pub(super) fn target_channel(chat_id: &str, thread_id: Option<&str>) -> Option<ChannelId> {
    thread_id
        .unwrap_or(chat_id)
        .parse::<u64>()
        .ok()
        .filter(|id| *id != 0)
        .map(ChannelId::new)
}

/// Maps serenity's errors onto the sender's retry classes.
pub(super) fn classify(err: &serenity::Error, rate_limit_wait: Duration) -> SendError {
    match err {
        serenity::Error::Http(HttpError::UnsuccessfulRequest(resp)) => {
            let status = resp.status_code.as_u16();
            let what = format!("discord answered {status}: {}", resp.error.message);
            match status {
                429 => SendError::RetryAfter(rate_limit_wait),
                500..=599 => SendError::Transient(what),
                // 408 (timeout) and 409 (conflict) are worth another try; other 4xx are not.
                408 | 409 => SendError::Transient(what),
                _ => SendError::Permanent(what),
            }
        }
        serenity::Error::Http(HttpError::Request(e)) => {
            SendError::Transient(format!("request failed: {e}"))
        }
        serenity::Error::Io(e) => SendError::Transient(format!("io: {e}")),
        // Model checks (a chunk over the limit, …) and builder errors will fail the same way
        // every time.
        other => SendError::Permanent(other.to_string()),
    }
}

/// Whether Discord said the message is gone (404, "Unknown Message").
fn is_unknown_message(err: &serenity::Error) -> bool {
    matches!(err, serenity::Error::Http(HttpError::UnsuccessfulRequest(resp)) if resp.status_code.as_u16() == 404)
}

impl DiscordOutbound {
    async fn edit(
        &self,
        channel: ChannelId,
        message_id: &str,
        text: &str,
    ) -> Result<(), serenity::Error> {
        let id = message_id
            .parse::<u64>()
            .ok()
            .filter(|id| *id != 0)
            .ok_or_else(|| serenity::Error::Other("not a Discord message id"))?;
        let edit = EditMessage::new()
            .content(text)
            .allowed_mentions(allowed_mentions(false));
        channel
            .edit_message(self.http.as_ref(), MessageId::new(id), edit)
            .await?;
        Ok(())
    }

    /// A slash command's answer: the first chunk replaces the deferred "thinking…", the rest
    /// follow it (ephemeral, like the deferral).
    async fn answer_interaction(
        &self,
        d: &super::interactions::Deferred,
        row: &OutboxRow,
    ) -> Result<String, SendError> {
        self.http.set_application_id(d.application);
        let sent = if row.chunk_index == 0 {
            EditInteractionResponse::new()
                .content(row.text.as_str())
                .allowed_mentions(allowed_mentions(false))
                .execute(self.http.as_ref(), &d.token)
                .await
        } else {
            CreateInteractionResponseFollowup::new()
                .content(row.text.as_str())
                .ephemeral(true)
                .allowed_mentions(allowed_mentions(false))
                .execute(self.http.as_ref(), (None, &d.token))
                .await
        };
        match sent {
            Ok(m) => Ok(m.id.get().to_string()),
            Err(e) => Err(classify(&e, self.rate_limit_wait)),
        }
    }

    fn channel_of(to: &PreviewTarget<'_>) -> Result<ChannelId, SendError> {
        target_channel(to.chat_id, to.thread_id).ok_or_else(|| {
            SendError::Permanent(format!("not a Discord channel id: {:?}", to.chat_id))
        })
    }
}

#[async_trait]
impl Outbound for DiscordOutbound {
    fn platform(&self) -> Platform {
        Platform::named("discord")
    }

    fn split(&self, text: &str) -> Vec<String> {
        split_message(text, DISCORD_LIMIT, Measure::Chars)
    }

    async fn send(&self, row: &OutboxRow) -> Result<String, SendError> {
        if let Some(d) = row
            .reply_to
            .as_deref()
            .filter(|r| r.starts_with("interaction:"))
            .and_then(|r| self.interactions.get(r))
        {
            return self.answer_interaction(&d, row).await;
        }
        let Some(channel) = target_channel(&row.chat_id, row.thread_id.as_deref()) else {
            return Err(SendError::Permanent(format!(
                "not a Discord channel id: {:?}/{:?}",
                row.chat_id, row.thread_id
            )));
        };
        let reply = reply_target(row);
        let mut msg = CreateMessage::new()
            .content(row.text.as_str())
            .allowed_mentions(allowed_mentions(reply.is_some()));
        if let Some(id) = reply {
            // A deleted original must not make the answer undeliverable: send it unthreaded.
            msg = msg.reference_message(
                MessageReference::new(MessageReferenceKind::Default, channel)
                    .message_id(id)
                    .fail_if_not_exists(false),
            );
        }
        match channel.send_message(&self.http, msg).await {
            Ok(sent) => Ok(sent.id.get().to_string()),
            Err(e) => Err(classify(&e, self.rate_limit_wait)),
        }
    }

    /// A file row: one message carrying the file as an attachment, pinging nobody.
    async fn send_file(&self, row: &OutboxRow, file: &OutFile) -> Result<String, SendError> {
        let Some(channel) = target_channel(&row.chat_id, row.thread_id.as_deref()) else {
            return Err(SendError::Permanent(format!(
                "not a Discord channel id: {:?}/{:?}",
                row.chat_id, row.thread_id
            )));
        };
        let msg = CreateMessage::new()
            .allowed_mentions(allowed_mentions(false))
            .add_file(CreateAttachment::bytes(
                file.data.clone(),
                file.name.clone(),
            ));
        match channel.send_message(&self.http, msg).await {
            Ok(sent) => Ok(sent.id.get().to_string()),
            Err(e) => Err(classify(&e, self.rate_limit_wait)),
        }
    }

    fn previews(&self) -> bool {
        true
    }

    async fn preview_send(&self, to: &PreviewTarget<'_>, text: &str) -> Result<String, SendError> {
        let channel = Self::channel_of(to)?;
        let reply = to
            .reply_to
            .and_then(|r| r.parse::<u64>().ok())
            .filter(|id| *id != 0)
            .map(MessageId::new);
        let mut msg = CreateMessage::new()
            .content(text)
            .allowed_mentions(allowed_mentions(reply.is_some()));
        if let Some(id) = reply {
            msg = msg.reference_message(
                MessageReference::new(MessageReferenceKind::Default, channel)
                    .message_id(id)
                    .fail_if_not_exists(false),
            );
        }
        match channel.send_message(&self.http, msg).await {
            Ok(sent) => Ok(sent.id.get().to_string()),
            Err(e) => Err(classify(&e, self.rate_limit_wait)),
        }
    }

    async fn preview_edit(
        &self,
        to: &PreviewTarget<'_>,
        message_id: &str,
        text: &str,
    ) -> Result<(), SendError> {
        let channel = Self::channel_of(to)?;
        self.edit(channel, message_id, text)
            .await
            .map_err(|e| classify(&e, self.rate_limit_wait))
    }

    async fn preview_delete(
        &self,
        to: &PreviewTarget<'_>,
        message_id: &str,
    ) -> Result<(), SendError> {
        let channel = Self::channel_of(to)?;
        let Some(id) = message_id.parse::<u64>().ok().filter(|id| *id != 0) else {
            return Ok(());
        };
        match channel.delete_message(&self.http, MessageId::new(id)).await {
            Ok(()) => Ok(()),
            Err(e) if is_unknown_message(&e) => Ok(()),
            Err(e) => Err(classify(&e, self.rate_limit_wait)),
        }
    }

    async fn finalize(&self, row: &OutboxRow, message_id: &str) -> Result<String, SendError> {
        let Some(channel) = target_channel(&row.chat_id, row.thread_id.as_deref()) else {
            return self.send(row).await;
        };
        match self.edit(channel, message_id, &row.text).await {
            Ok(()) => Ok(message_id.to_string()),
            // The preview was deleted: the chunk goes out as a message of its own.
            Err(e) if is_unknown_message(&e) => self.send(row).await,
            Err(e) => Err(classify(&e, self.rate_limit_wait)),
        }
    }

    async fn typing(&self, chat_id: &str, thread_id: Option<&str>) {
        let Some(channel) = target_channel(chat_id, thread_id) else {
            return;
        };
        if let Err(e) = channel.broadcast_typing(&self.http).await {
            tracing::debug!(error = %e, channel = %channel, "discord typing indicator failed");
        }
    }

    async fn ask(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        self.ask_with_buttons(ask).await
    }

    async fn ask_closed(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        message_id: &str,
        text: &str,
    ) {
        self.close_question(chat_id, thread_id, message_id, text)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{LaneKey, Platform};
    use crate::store::OutboxStatus;

    fn row(chunk_index: i64, reply_to: Option<&str>) -> OutboxRow {
        OutboxRow {
            id: 1,
            idem_key: "k".into(),
            reply_key: None,
            lane: LaneKey::parse("discord:600"),
            platform: Platform::named("discord"),
            chat_id: "600".into(),
            thread_id: None,
            reply_to: reply_to.map(str::to_string),
            inbox_id: None,
            chunk_index,
            text: "hi".into(),
            status: OutboxStatus::Pending,
            attempts: 0,
            platform_message_id: None,
            last_error: None,
            created_at: 0,
            sent_at: None,
            media: None,
        }
    }

    #[test]
    fn reply_target_table() {
        // (chunk, reply_to, replies to)
        let cases = [
            (0, Some("7001"), Some(7001)),
            (1, Some("7001"), None),
            (0, None, None),
            (0, Some("interaction:7001"), None),
            (0, Some("0"), None),
        ];
        for (chunk, reply_to, want) in cases {
            assert_eq!(
                reply_target(&row(chunk, reply_to)).map(|m| m.get()),
                want,
                "{chunk} {reply_to:?}"
            );
        }
    }

    #[test]
    fn target_channel_table() {
        let cases = [
            ("600", None, Some(600)),
            ("600", Some("601"), Some(601)),
            ("web-chat", None, None),
            ("0", None, None),
        ];
        for (chat, thread, want) in cases {
            assert_eq!(target_channel(chat, thread).map(|c| c.get()), want);
        }
    }

    #[test]
    fn allowed_mentions_never_parse_the_text() {
        for replying in [true, false] {
            let v = serde_json::to_value(allowed_mentions(replying)).unwrap();
            let parse = v["parse"].as_array().cloned().unwrap_or_default();
            assert!(parse.is_empty(), "{v}");
            assert_eq!(v["users"], serde_json::json!([]));
            assert_eq!(v["roles"], serde_json::json!([]));
            assert_eq!(v["replied_user"], replying);
        }
    }
}
