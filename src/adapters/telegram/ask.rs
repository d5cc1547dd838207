//! Approval questions on Telegram: a message with an inline keyboard (Approve / Deny) whose
//! callback data names the approval, and the edit that closes it once answered.
//!
//! The question is plain text (no parse mode): it quotes model-written arguments, which must
//! never fail a send over an entity Telegram cannot parse.

use teloxide::payloads::SendMessageSetters;
use teloxide::requests::Requester;
use teloxide::types::{InlineKeyboardButton, InlineKeyboardMarkup, MessageId, ThreadId};
use teloxide::RequestError;

use super::outbound::{classify, TelegramOutbound};
use crate::delivery::{approval_button_data, Ask, SendError};

impl TelegramOutbound {
    pub(super) async fn ask_with_buttons(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        let chat = ask
            .chat_id
            .parse::<i64>()
            .map(teloxide::types::ChatId)
            .map_err(|_| SendError::Permanent("the chat id is not a Telegram chat".into()))?;
        let keyboard = InlineKeyboardMarkup::new([[
            InlineKeyboardButton::callback("Approve", approval_button_data(ask.approval_id, true)),
            InlineKeyboardButton::callback("Deny", approval_button_data(ask.approval_id, false)),
        ]]);
        let thread = ask
            .thread_id
            .and_then(|t| t.parse::<i32>().ok())
            .map(|t| ThreadId(MessageId(t)));
        let mut req = self
            .bot
            .0
            .send_message(chat, ask.text)
            .reply_markup(keyboard);
        if let Some(t) = thread {
            req = req.message_thread_id(t);
        }
        let sent = req.await;
        sent.map(|m| m.id.0.to_string())
            .map_err(|e| classify(&e, &self.token))
    }

    /// Replaces the question with `text`; without a `reply_markup` the buttons go away.
    pub(super) async fn close_question(&self, chat_id: &str, message_id: &str, text: &str) {
        let (Ok(chat), Ok(id)) = (chat_id.parse::<i64>(), message_id.parse::<i32>()) else {
            return;
        };
        let chat = teloxide::types::ChatId(chat);
        let res: Result<_, RequestError> = self
            .bot
            .0
            .edit_message_text(chat, MessageId(id), text)
            .await;
        if let Err(e) = res {
            tracing::debug!(error = %super::redact(&e, &self.token), "approval question not closed");
        }
    }
}
