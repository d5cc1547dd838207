//! Files out: a reply's file row becomes one `sendPhoto` (an image up to Telegram's 10 MB
//! photo limit), one `sendVoice` (Ogg/Opus audio: a spoken reply) or one `sendDocument`
//! (anything else), uploaded from memory under the file's
//! name through the same paced client as text. The message id is recorded like a text chunk's.
//!
//! Must not: retry an upload itself after Telegram accepted it, or put the token in an error.

use teloxide::payloads::{SendDocumentSetters, SendPhotoSetters, SendVoiceSetters};
use teloxide::requests::Requester;
use teloxide::types::{ChatId, InputFile, Message, MessageId, ThreadId};
use teloxide::RequestError;

use super::outbound::{classify, parse_chat, TelegramOutbound};
use crate::delivery::{OutFile, SendError};
use crate::store::OutboxRow;

/// The largest photo `sendPhoto` takes; a bigger image goes as a document.
pub const PHOTO_MAX_BYTES: usize = 10 * 1024 * 1024;

impl TelegramOutbound {
    /// Uploads `file` into the row's chat (and thread); returns the message id.
    pub(super) async fn upload(
        &self,
        row: &OutboxRow,
        file: &OutFile,
    ) -> Result<String, SendError> {
        let chat = parse_chat(&row.chat_id)
            .ok_or_else(|| SendError::Permanent(format!("not a chat id: {:?}", row.chat_id)))?;
        let thread = row
            .thread_id
            .as_deref()
            .and_then(|t| t.parse::<i32>().ok())
            .map(|t| ThreadId(MessageId(t)));
        let photo = file.is_image() && file.data.len() <= PHOTO_MAX_BYTES;
        let sent = send(&self.bot.0, chat, thread, file, photo).await;
        sent.map(|m| m.id.0.to_string())
            .map_err(|e| classify(&e, &self.token))
    }
}

async fn send<R>(
    bot: &R,
    chat: ChatId,
    thread: Option<ThreadId>,
    file: &OutFile,
    photo: bool,
) -> Result<Message, RequestError>
where
    R: Requester<Err = RequestError>,
{
    let input = InputFile::memory(file.data.clone()).file_name(file.name.clone());
    if file.is_voice() {
        let mut req = bot.send_voice(chat, input);
        if let Some(t) = thread {
            req = req.message_thread_id(t);
        }
        return req.await;
    }
    if photo {
        let mut req = bot.send_photo(chat, input);
        if let Some(t) = thread {
            req = req.message_thread_id(t);
        }
        req.await
    } else {
        let mut req = bot.send_document(chat, input);
        if let Some(t) = thread {
            req = req.message_thread_id(t);
        }
        req.await
    }
}
