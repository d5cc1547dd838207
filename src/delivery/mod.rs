//! Delivery: how reply chunks leave Herald.
//!
//! Each platform registers an [`Outbound`] (split rule, send, typing indicator). The
//! [`sender`] loop claims outbox rows from the store and hands them to the platform's
//! outbound, recording the platform message id so that a sent row is never sent again.

pub mod liveness;
pub mod sender;

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

#[async_trait]
pub trait Outbound: Send + Sync {
    fn platform(&self) -> Platform;
    /// Splits a reply into chunks the platform accepts, in order.
    fn split(&self, text: &str) -> Vec<String>;
    /// Delivers one chunk; returns the platform's message id.
    async fn send(&self, row: &OutboxRow) -> Result<String, SendError>;
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

/// The outbounds of the adapters that run in this process.
#[derive(Clone, Default)]
pub struct Outbounds {
    by_platform: HashMap<Platform, Arc<dyn Outbound>>,
}

impl Outbounds {
    pub fn register(&mut self, o: Arc<dyn Outbound>) {
        self.by_platform.insert(o.platform(), o);
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
