//! Replies out: one outbox chunk → one `sendMessage`.
//!
//! Pacing within Telegram's limits is Herald's own (`delivery::pace`, applied by the outbox
//! sender and the previews before they call in here), so a person's answer never queues behind
//! a flood-limit slot it does not need. The bare bot never retries: a 429 comes back to
//! the outbox sender as `RetryAfter`, which waits and re-sends the same row.
//!
//! Formatting is HTML from a safe Markdown subset; when Telegram still rejects the entities the
//! same chunk goes again as plain text, so the person sees exactly one copy either way.
//!
//! Must not: retry a chunk itself after Telegram accepted it, or put the token in an error text.

use async_trait::async_trait;
use teloxide::payloads::{
    EditMessageText, EditMessageTextSetters, SendChatAction, SendChatActionSetters, SendMessage,
    SendMessageSetters,
};
use teloxide::requests::{Output, Request, Requester};
use teloxide::types::{
    ChatAction, ChatId, LinkPreviewOptions, Message, MessageId, ParseMode, ReplyParameters,
    ThreadId,
};
use teloxide::{ApiError, Bot, RequestError};

use super::format::markdown_to_html;
use super::redact;
use crate::adapters::split::{split_message, Measure, TELEGRAM_LIMIT};
use crate::delivery::{Ask, OutFile, Outbound, PreviewTarget, SendError};
use crate::domain::Platform;
use crate::store::OutboxRow;

pub struct TelegramOutbound {
    pub(super) bot: Client,
    pub(super) token: String,
}

/// The bot every request goes through; a thin wrapper so each request is built one way.
pub(super) struct Client(pub(super) Bot);

impl Client {
    async fn send_message(&self, payload: SendMessage) -> Result<Message, RequestError> {
        send_payload(self.0.send_message(payload.chat_id.clone(), ""), payload).await
    }

    async fn edit_message_text(&self, payload: EditMessageText) -> Result<Message, RequestError> {
        let (chat, id) = (payload.chat_id.clone(), payload.message_id);
        send_payload(self.0.edit_message_text(chat, id, ""), payload).await
    }

    async fn delete_message(&self, chat: ChatId, id: MessageId) -> Result<(), RequestError> {
        self.0.delete_message(chat, id).await?;
        Ok(())
    }

    async fn send_chat_action(&self, payload: SendChatAction) -> Result<(), RequestError> {
        send_payload(
            self.0
                .send_chat_action(payload.chat_id.clone(), payload.action),
            payload,
        )
        .await?;
        Ok(())
    }
}

/// Sends `req` with its payload replaced by `payload`, so both clients build requests the same way.
async fn send_payload<R>(mut req: R, payload: R::Payload) -> Result<Output<R>, R::Err>
where
    R: Request,
{
    *req.payload_mut() = payload;
    req.send().await
}

impl TelegramOutbound {
    pub fn new(bot: Bot, token: String) -> TelegramOutbound {
        TelegramOutbound {
            bot: Client(bot),
            token,
        }
    }

    async fn send_chunk(&self, row: &OutboxRow, formatted: bool) -> Result<String, RequestError> {
        let chat = parse_chat(&row.chat_id).ok_or_else(|| bad_row("chat id"))?;
        let text = if formatted {
            markdown_to_html(&row.text)
        } else {
            row.text.clone()
        };
        let mut req = SendMessage::new(chat, text).link_preview_options(LinkPreviewOptions {
            is_disabled: true,
            url: None,
            prefer_small_media: false,
            prefer_large_media: false,
            show_above_text: false,
        });
        if formatted {
            req = req.parse_mode(ParseMode::Html);
        }
        if let Some(thread) = row.thread_id.as_deref().and_then(|t| t.parse::<i32>().ok()) {
            req = req.message_thread_id(ThreadId(MessageId(thread)));
        }
        // Only the first chunk quotes the person's message; the rest follow it.
        if row.chunk_index == 0 {
            if let Some(id) = row.reply_to.as_deref().and_then(reply_message_id) {
                let mut reply = ReplyParameters::new(MessageId(id));
                reply.allow_sending_without_reply = Some(true);
                req = req.reply_parameters(reply);
            }
        }
        let sent = self.bot.send_message(req).await?;
        Ok(sent.id.0.to_string())
    }
}

impl TelegramOutbound {
    /// Edits message `id` to `text`; an unchanged text counts as done.
    async fn edit(
        &self,
        chat: ChatId,
        id: i32,
        text: String,
        html: bool,
    ) -> Result<(), RequestError> {
        let mut req = EditMessageText::new(chat, MessageId(id), text).link_preview_options(
            LinkPreviewOptions {
                is_disabled: true,
                url: None,
                prefer_small_media: false,
                prefer_large_media: false,
                show_above_text: false,
            },
        );
        if html {
            req = req.parse_mode(ParseMode::Html);
        }
        match self.bot.edit_message_text(req).await {
            Ok(_) | Err(RequestError::Api(ApiError::MessageNotModified)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The final edit of a preview into an outbox chunk: HTML, plain when Telegram rejects
    /// the entities (like `send`).
    async fn finalize_chunk(&self, row: &OutboxRow, id: i32) -> Result<(), RequestError> {
        let chat = parse_chat(&row.chat_id).ok_or_else(|| bad_row("chat id"))?;
        match self.edit(chat, id, markdown_to_html(&row.text), true).await {
            Err(RequestError::Api(ApiError::CantParseEntities(why))) => {
                tracing::warn!(outbox_id = row.id, lane = %row.lane, reason = %redact(&why, &self.token),
                    "telegram rejected the formatting; editing the chunk in as plain text");
                metrics::counter!("herald_telegram_plain_fallback_total").increment(1);
                self.edit(chat, id, row.text.clone(), false).await
            }
            other => other,
        }
    }
}

#[async_trait]
impl Outbound for TelegramOutbound {
    fn platform(&self) -> Platform {
        Platform::named("telegram")
    }

    fn split(&self, text: &str) -> Vec<String> {
        split_message(text, TELEGRAM_LIMIT, Measure::Utf16)
    }

    async fn send(&self, row: &OutboxRow) -> Result<String, SendError> {
        match self.send_chunk(row, true).await {
            Ok(id) => Ok(id),
            Err(RequestError::Api(ApiError::CantParseEntities(why))) => {
                tracing::warn!(outbox_id = row.id, lane = %row.lane, reason = %redact(&why, &self.token),
                    "telegram rejected the formatting; sending the chunk as plain text");
                metrics::counter!("herald_telegram_plain_fallback_total").increment(1);
                self.send_chunk(row, false)
                    .await
                    .map_err(|e| classify(&e, &self.token))
            }
            Err(e) => Err(classify(&e, &self.token)),
        }
    }

    async fn send_file(&self, row: &OutboxRow, file: &OutFile) -> Result<String, SendError> {
        self.upload(row, file).await
    }

    fn previews(&self) -> bool {
        true
    }

    async fn preview_send(&self, to: &PreviewTarget<'_>, text: &str) -> Result<String, SendError> {
        let chat = parse_chat(to.chat_id)
            .ok_or_else(|| SendError::Permanent(format!("not a chat id: {:?}", to.chat_id)))?;
        let mut req = SendMessage::new(chat, text).link_preview_options(LinkPreviewOptions {
            is_disabled: true,
            url: None,
            prefer_small_media: false,
            prefer_large_media: false,
            show_above_text: false,
        });
        if let Some(thread) = to.thread_id.and_then(|t| t.parse::<i32>().ok()) {
            req = req.message_thread_id(ThreadId(MessageId(thread)));
        }
        if let Some(id) = to.reply_to.and_then(reply_message_id) {
            let mut reply = ReplyParameters::new(MessageId(id));
            reply.allow_sending_without_reply = Some(true);
            req = req.reply_parameters(reply);
        }
        match self.bot.send_message(req).await {
            Ok(sent) => Ok(sent.id.0.to_string()),
            Err(e) => Err(classify(&e, &self.token)),
        }
    }

    async fn preview_edit(
        &self,
        to: &PreviewTarget<'_>,
        message_id: &str,
        text: &str,
    ) -> Result<(), SendError> {
        let (Some(chat), Ok(id)) = (parse_chat(to.chat_id), message_id.parse::<i32>()) else {
            return Err(SendError::Permanent("not a Telegram message".into()));
        };
        self.edit(chat, id, text.to_string(), false)
            .await
            .map_err(|e| classify(&e, &self.token))
    }

    async fn preview_delete(
        &self,
        to: &PreviewTarget<'_>,
        message_id: &str,
    ) -> Result<(), SendError> {
        let (Some(chat), Ok(id)) = (parse_chat(to.chat_id), message_id.parse::<i32>()) else {
            return Ok(());
        };
        match self.bot.delete_message(chat, MessageId(id)).await {
            Ok(()) | Err(RequestError::Api(ApiError::MessageToDeleteNotFound)) => Ok(()),
            Err(e) => Err(classify(&e, &self.token)),
        }
    }

    async fn finalize(&self, row: &OutboxRow, message_id: &str) -> Result<String, SendError> {
        let Ok(id) = message_id.parse::<i32>() else {
            return self.send(row).await;
        };
        match self.finalize_chunk(row, id).await {
            Ok(()) => Ok(message_id.to_string()),
            // The person deleted the preview: the chunk goes out as a message of its own.
            Err(RequestError::Api(
                ApiError::MessageToEditNotFound | ApiError::MessageCantBeEdited,
            )) => self.send(row).await,
            Err(e) => Err(classify(&e, &self.token)),
        }
    }

    async fn typing(&self, chat_id: &str, thread_id: Option<&str>) {
        let Some(chat) = parse_chat(chat_id) else {
            return;
        };
        let mut req = SendChatAction::new(chat, ChatAction::Typing);
        if let Some(thread) = thread_id.and_then(|t| t.parse::<i32>().ok()) {
            req = req.message_thread_id(ThreadId(MessageId(thread)));
        }
        if let Err(e) = self.bot.send_chat_action(req).await {
            tracing::debug!(error = %redact(&e, &self.token), "typing indicator not shown");
        }
    }

    async fn ask(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        self.ask_with_buttons(ask).await
    }

    async fn ask_closed(
        &self,
        chat_id: &str,
        _thread_id: Option<&str>,
        message_id: &str,
        text: &str,
    ) {
        self.close_question(chat_id, message_id, text).await
    }
}

pub(super) fn parse_chat(chat_id: &str) -> Option<ChatId> {
    chat_id.parse::<i64>().ok().map(ChatId)
}

/// `row.reply_to` is `<chat_id>:<message_id>` (message ids are per chat).
fn reply_message_id(reply_to: &str) -> Option<i32> {
    reply_to.rsplit_once(':')?.1.parse().ok()
}

fn bad_row(what: &str) -> RequestError {
    RequestError::Api(ApiError::Unknown(format!(
        "Bad Request: outbox row has an invalid {what}"
    )))
}

/// Maps a teloxide error onto what the outbox sender does next.
pub fn classify(e: &RequestError, token: &str) -> SendError {
    let text = redact(e, token);
    match e {
        RequestError::RetryAfter(s) => SendError::RetryAfter(s.duration()),
        RequestError::Network(_) | RequestError::Io(_) | RequestError::InvalidJson { .. } => {
            SendError::Transient(text)
        }
        RequestError::MigrateToChatId(_) => SendError::Permanent(text),
        RequestError::Api(api) => {
            if api_error_is_permanent(api) {
                SendError::Permanent(text)
            } else {
                SendError::Transient(text)
            }
        }
    }
}

/// Telegram answers requests it will never accept with "Bad Request", "Forbidden" or
/// "Unauthorized"; anything else (a 5xx text, an unknown hiccup) is worth another try.
fn api_error_is_permanent(api: &ApiError) -> bool {
    match api {
        ApiError::Unknown(desc) => {
            let d = desc.trim_start();
            d.starts_with("Bad Request")
                || d.starts_with("Forbidden")
                || d.starts_with("Unauthorized")
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use teloxide::types::Seconds;

    #[test]
    fn error_classification_table() {
        let token = "123:secret-token";
        let cases: Vec<(RequestError, &str)> = vec![
            (RequestError::RetryAfter(Seconds::from_seconds(3)), "retry"),
            (RequestError::Api(ApiError::ChatNotFound), "permanent"),
            (RequestError::Api(ApiError::BotBlocked), "permanent"),
            (
                RequestError::Api(ApiError::Unknown("Internal Server Error".into())),
                "transient",
            ),
            (
                RequestError::Api(ApiError::Unknown("Bad Gateway".into())),
                "transient",
            ),
            (
                RequestError::Api(ApiError::Unknown(
                    "Bad Request: message thread not found".into(),
                )),
                "permanent",
            ),
            (
                RequestError::Api(ApiError::Unknown("Forbidden: not enough rights".into())),
                "permanent",
            ),
        ];
        for (err, want) in cases {
            let got = match classify(&err, token) {
                SendError::RetryAfter(d) => {
                    assert_eq!(d.as_secs(), 3);
                    "retry"
                }
                SendError::Transient(_) => "transient",
                SendError::Permanent(_) => "permanent",
            };
            assert_eq!(got, want, "{err:?}");
        }
    }

    #[test]
    fn reply_to_is_the_message_part() {
        assert_eq!(reply_message_id("-100123:42"), Some(42));
        assert_eq!(reply_message_id("5:7"), Some(7));
        assert_eq!(reply_message_id("garbage"), None);
    }
}
