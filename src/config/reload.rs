//! `[reload]`: how a running daemon takes a changed configuration (`crate::reload`). SIGHUP and
//! `herald reload` always work; `watch` adds the config file's own changes.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReloadConfig {
    /// Reload when the config file changes (its modification time, looked at every second).
    pub watch: bool,
}
