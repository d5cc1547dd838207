//! The `[inbox]` and `[outbox]` sections: how often one inbound message or one outbound chunk
//! is tried before it is set aside (dead-lettered, or failed), and the sender's pacing.
//!
//! Only settings live here; the poison guard is `lanes::worker`'s and the sender `delivery`'s.

use serde::{Deserialize, Serialize};

use super::Config;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InboxConfig {
    /// Starts of processing for one inbound message (a crash during its turn counts) before it
    /// is dead-lettered: marked `dead`, the person told once, the lane moving on.
    pub max_attempts: i64,
}

impl Default for InboxConfig {
    fn default() -> Self {
        InboxConfig { max_attempts: 3 }
    }
}

impl Config {
    /// Folds deprecated keys into their replacements (`lanes.max_attempts` →
    /// `inbox.max_attempts`), so the rest of the daemon reads one key.
    pub(crate) fn fold_deprecated(&mut self) {
        if let Some(n) = self.lanes.max_attempts.take() {
            self.inbox.max_attempts = n;
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutboxConfig {
    /// Send attempts per chunk before it is marked failed.
    pub max_attempts: i64,
    /// Fallback poll interval; new rows are normally picked up at once.
    pub poll_ms: u64,
    /// Rows claimed per round.
    pub batch: i64,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        OutboxConfig {
            max_attempts: 8,
            poll_ms: 500,
            batch: 64,
        }
    }
}
