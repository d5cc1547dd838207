//! Delivery: how reply chunks leave Herald.
//!
//! Each platform registers an [`Outbound`] (split rule, send, typing indicator). The
//! [`sender`] loop claims outbox rows from the store and hands them to the platform's
//! outbound, recording the platform message id so that a sent row is never sent again.

mod files;
mod finalize;
mod inflight;
pub mod liveness;
pub mod pace;
pub mod previews;
pub mod sender;
mod swap;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::Platform;
use crate::store::OutboxRow;

#[derive(Debug, Clone, thiserror::Error)]
pub enum SendError {
    /// The platform asked us to wait (Telegram `retry_after`, Discord 429).
    #[error("rate limited; retry after {0:?}")]
    RetryAfter(Duration),
    /// Network trouble or a 5xx: retry with backoff.
    #[error("transient send failure: {0}")]
    Transient(String),
    /// The platform refused the message for good (chat gone, bot blocked).
    #[error("permanent send failure: {0}")]
    Permanent(String),
}

impl SendError {
    /// What the sender does with the row, as adapters' classification tests read it:
    /// `retry <n>s`, `transient` or `permanent`.
    #[cfg(test)]
    pub(crate) fn class(&self) -> String {
        match self {
            SendError::RetryAfter(d) => format!("retry {}s", d.as_secs()),
            SendError::Transient(_) => "transient".into(),
            SendError::Permanent(_) => "permanent".into(),
        }
    }
}

#[async_trait]
pub trait Outbound: Send + Sync {
    fn platform(&self) -> Platform;
    /// Splits a reply into chunks the platform accepts, in order.
    fn split(&self, text: &str) -> Vec<String>;
    /// Delivers one chunk; returns the platform's message id.
    async fn send(&self, row: &OutboxRow) -> Result<String, SendError>;
    /// Delivers a file row (`row.media`) with its bytes; returns the platform's message id.
    async fn send_file(&self, _row: &OutboxRow, _file: &OutFile) -> Result<String, SendError> {
        Err(SendError::Permanent(
            "this platform cannot send files".into(),
        ))
    }
    /// Shows that a turn is running (best effort).
    async fn typing(&self, _chat_id: &str, _thread_id: Option<&str>) {}
    /// Asks the person a yes/no question with Approve / Deny buttons whose data carries the
    /// approval id ([`approval_button_data`]); returns the platform message id. A platform
    /// without buttons cannot ask, and the call it was for is denied.
    async fn ask(&self, _ask: &Ask<'_>) -> Result<String, SendError> {
        Err(SendError::Permanent(
            "this platform cannot show approval buttons".into(),
        ))
    }
    /// Replaces a question's text and removes its buttons once it is answered (best effort).
    async fn ask_closed(
        &self,
        _chat_id: &str,
        _thread_id: Option<&str>,
        _message_id: &str,
        _text: &str,
    ) {
    }

    /// Whether this platform shows live previews of an answer (the `preview_*` calls work).
    fn previews(&self) -> bool {
        false
    }
    /// Sends a preview message: plain text, no formatting (a half-written answer may hold
    /// half a Markdown construct). Returns the platform's message id.
    async fn preview_send(
        &self,
        _to: &PreviewTarget<'_>,
        _text: &str,
    ) -> Result<String, SendError> {
        Err(SendError::Permanent(
            "this platform shows no previews".into(),
        ))
    }
    /// Replaces a preview message's text (plain).
    async fn preview_edit(
        &self,
        _to: &PreviewTarget<'_>,
        _message_id: &str,
        _text: &str,
    ) -> Result<(), SendError> {
        Err(SendError::Permanent(
            "this platform shows no previews".into(),
        ))
    }
    /// Removes a preview message the final answer does not need.
    async fn preview_delete(
        &self,
        _to: &PreviewTarget<'_>,
        _message_id: &str,
    ) -> Result<(), SendError> {
        Ok(())
    }
    /// Delivers `row` by editing the preview `message_id` into it, formatted exactly as
    /// [`Outbound::send`] would send it; a preview that is gone is replaced by a send. Returns
    /// the platform message id now holding the chunk.
    async fn finalize(&self, row: &OutboxRow, _message_id: &str) -> Result<String, SendError> {
        self.send(row).await
    }
}

/// A file about to be sent ([`Outbound::send_file`]): its bytes, read from the media cache.
#[derive(Clone)]
pub struct OutFile {
    pub name: String,
    pub mime: String,
    pub data: Vec<u8>,
}

impl std::fmt::Debug for OutFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OutFile({:?}, {}, {} bytes)",
            self.name,
            self.mime,
            self.data.len()
        )
    }
}

impl OutFile {
    /// Ogg/Opus audio: a spoken reply, which a platform with voice messages sends as one.
    pub fn is_voice(&self) -> bool {
        self.mime.eq_ignore_ascii_case("audio/ogg")
    }

    pub fn is_image(&self) -> bool {
        self.mime.to_ascii_lowercase().starts_with("image/")
    }
}

/// An approval question for [`Outbound::ask`].
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    pub chat_id: &'a str,
    pub thread_id: Option<&'a str>,
    pub approval_id: &'a str,
    /// Plain text, no markup.
    pub text: &'a str,
}

/// The data of an approval button: `ap:<id>:y` or `ap:<id>:n` (at most 64 bytes, Telegram's
/// `callback_data` limit, for ids up to 58 characters).
pub fn approval_button_data(approval_id: &str, approve: bool) -> String {
    format!("ap:{approval_id}:{}", if approve { "y" } else { "n" })
}

/// Reads button data written by [`approval_button_data`]: the approval id and the answer.
pub fn parse_approval_button(data: &str) -> Option<(&str, bool)> {
    let rest = data.strip_prefix("ap:")?;
    let (id, answer) = rest.rsplit_once(':')?;
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
        return None;
    }
    match answer {
        "y" => Some((id, true)),
        "n" => Some((id, false)),
        _ => None,
    }
}

/// Where a preview goes: the chat, its thread, and the message the answer replies to (only
/// the first preview message quotes it, like the first chunk of a reply).
#[derive(Debug, Clone, Copy)]
pub struct PreviewTarget<'a> {
    pub chat_id: &'a str,
    pub thread_id: Option<&'a str>,
    pub reply_to: Option<&'a str>,
}

/// How a row is paced: the first message of a reply to a person's message may spend the
/// chat's burst; a reply's later chunks, files and messages nobody asked for are bulk.
pub fn urgency(row: &crate::store::OutboxRow) -> pace::Urgency {
    match row.chunk_index == 0 && row.inbox_id.is_some() && row.media.is_none() {
        true => pace::Urgency::Person,
        false => pace::Urgency::Bulk,
    }
}

/// The outbounds of the adapters that run in this process.
#[derive(Clone, Default)]
pub struct Outbounds {
    by_platform: HashMap<Platform, Arc<dyn Outbound>>,
    /// The same outbounds, replaceable by a reload (every clone shares them).
    swaps: HashMap<Platform, Arc<swap::Swappable>>,
    /// The pace of sends and edits per chat and per platform, shared by the outbox sender,
    /// previews and approval questions.
    pub pace: Arc<pace::Pace>,
}

impl Outbounds {
    pub fn register(&mut self, o: Arc<dyn Outbound>) {
        let swap = Arc::new(swap::Swappable::new(o));
        self.swaps.insert(swap.platform(), swap.clone());
        self.by_platform.insert(swap.platform(), swap);
    }

    /// Sends `o`'s platform through `o` from now on, in every clone of these outbounds; `false`
    /// when that platform was not registered at start (it then needs a restart).
    pub fn replace(&self, o: Arc<dyn Outbound>) -> bool {
        match self.swaps.get(&o.platform()) {
            Some(swap) => {
                swap.replace(o);
                true
            }
            None => false,
        }
    }

    pub fn get(&self, p: Platform) -> Option<&Arc<dyn Outbound>> {
        self.by_platform.get(&p)
    }

    pub fn platforms(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .by_platform
            .keys()
            .map(|p| p.as_str().to_string())
            .collect();
        v.sort();
        v
    }

    /// Splits with the platform's rule; a platform without an outbound here (another replica
    /// runs it) keeps the text whole rather than guessing.
    pub fn split(&self, p: Platform, text: &str) -> Vec<String> {
        match self.get(p) {
            Some(o) => o.split(text),
            None => vec![text.to_string()],
        }
    }
}
