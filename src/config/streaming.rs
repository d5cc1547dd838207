//! The `[streaming]` section: whether people see an answer while it is written, and how fast
//! a platform's preview message may be edited.
//!
//! Kept on its own because it spans the provider (stream or not), the lanes (previews), the
//! outbox (the final edit) and the web chat (server-sent events). Only settings live here.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::domain::Platform;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamingConfig {
    /// Stream answers: the model call streams, chats get a preview message edited as text
    /// arrives, the web chat may ask for server-sent events. Off: exactly the behaviour
    /// without streaming (one message per chunk, after the turn).
    pub enabled: bool,
    /// Least time between two edits of previews in one chat, in milliseconds.
    pub edit_interval_ms: u64,
    /// Show the model's reasoning text live in the preview (never stored, never in the final
    /// message).
    pub show_reasoning: bool,
    /// Overrides `edit_interval_ms` in Telegram chats.
    pub telegram_edit_interval_ms: Option<u64>,
    /// Overrides `edit_interval_ms` in Discord channels.
    pub discord_edit_interval_ms: Option<u64>,
}

impl Default for StreamingConfig {
    fn default() -> Self {
        StreamingConfig {
            enabled: false,
            edit_interval_ms: 1000,
            show_reasoning: false,
            telegram_edit_interval_ms: None,
            discord_edit_interval_ms: None,
        }
    }
}

/// Telegram and Discord both rate-limit edits; faster than this is refused at start.
pub const MIN_EDIT_INTERVAL_MS: u64 = 100;

impl StreamingConfig {
    /// The pace of preview edits in one chat of `platform`.
    pub fn edit_interval(&self, platform: Platform) -> Duration {
        let own = match platform {
            Platform::Telegram => self.telegram_edit_interval_ms,
            Platform::Discord => self.discord_edit_interval_ms,
            _ => None,
        };
        Duration::from_millis(own.unwrap_or(self.edit_interval_ms))
    }
}
