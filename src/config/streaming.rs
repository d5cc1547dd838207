//! The `[streaming]` section: whether people see an answer while it is written, and how fast
//! a platform's preview message may be edited.
//!
//! Kept on its own because it spans the provider (stream or not), the lanes (previews), the
//! outbox (the final edit) and the web chat (server-sent events). Only settings live here.

use serde::{Deserialize, Serialize};

use crate::domain::ChatType;

/// Which chats see answers streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamChats {
    /// Private chats only: Telegram private chats, Discord DMs, the web chat and the API.
    Private,
    /// Every chat, groups and channels included.
    All,
    /// No chat: exactly the behaviour without streaming.
    None,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StreamingConfig {
    /// Stream answers: the model call streams, chats get a preview message edited as text
    /// arrives, the web chat may ask for server-sent events. The switch of earlier releases,
    /// kept with its meaning: `false` never streams, `true` (without `chats`) streams in every
    /// chat. Unset: `chats` decides.
    pub enabled: Option<bool>,
    /// Where answers stream: `private`, `all` or `none` (unset: the default, private).
    pub chats: Option<StreamChats>,
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
            enabled: None,
            chats: None,
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
    /// Which chats stream: `enabled = false` wins over everything, then `chats`, then an old
    /// `enabled = true` (every chat, as before), then the default: private chats, where a
    /// person waits for the answer; groups stay unstreamed (their edits would count against
    /// the group's much tighter pace).
    pub fn chats(&self) -> StreamChats {
        match (self.enabled, self.chats) {
            (Some(false), _) => StreamChats::None,
            (_, Some(chats)) => chats,
            (Some(true), None) => StreamChats::All,
            (None, None) => StreamChats::Private,
        }
    }

    /// Whether a turn in a chat of this type streams its answer.
    pub fn streams_in(&self, chat: ChatType) -> bool {
        match self.chats() {
            StreamChats::All => true,
            StreamChats::Private => chat == ChatType::Dm,
            StreamChats::None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(enabled: Option<bool>, chats: Option<StreamChats>) -> StreamingConfig {
        StreamingConfig {
            enabled,
            chats,
            ..StreamingConfig::default()
        }
    }

    #[test]
    fn private_chats_stream_by_default_and_old_switches_keep_their_meaning() {
        let private = [ChatType::Dm];
        let shared = [ChatType::Group, ChatType::Channel, ChatType::Thread];
        let default = StreamingConfig::default();
        assert!(private.iter().all(|&c| default.streams_in(c)));
        assert!(shared.iter().all(|&c| !default.streams_in(c)));
        let asked = cfg(None, Some(StreamChats::Private));
        assert!(private.iter().all(|&c| asked.streams_in(c)));
        assert!(shared.iter().all(|&c| !asked.streams_in(c)));
        // An old `enabled = true` streamed everywhere; it still does.
        let old_on = cfg(Some(true), None);
        assert!(private.iter().chain(&shared).all(|&c| old_on.streams_in(c)));
        // An old `enabled = false` never streamed, whatever `chats` says.
        for chats in [None, Some(StreamChats::All), Some(StreamChats::Private)] {
            let off = cfg(Some(false), chats);
            assert!(private.iter().chain(&shared).all(|&c| !off.streams_in(c)));
        }
        assert_eq!(
            cfg(Some(true), Some(StreamChats::Private)).chats(),
            StreamChats::Private
        );
        assert_eq!(
            cfg(None, Some(StreamChats::None)).chats(),
            StreamChats::None
        );
    }
}
