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
