//! The `[handoff]` section: capsule writing, injection and the confidential lanes.
//!
//! Kept apart from the core sections so the feature's keys read as one block. Only settings
//! live here; what a capsule is and how it is built is `crate::handoff`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Endpoint;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffConfig {
    /// The `handoff` word and `/wrapup` start a capsule; off: they are ordinary messages.
    pub enabled: bool,
    /// Hand the capsule to the next session's first turn. Off: capsules are still written
    /// (to audit the writer) but never injected.
    pub inject: bool,
    /// The writer model and its fallbacks, tried in order. Empty: the main `[llm]` chain.
    pub writer: Vec<Endpoint>,
    /// Every lane is confidential: 400-word breadcrumb, scrubbed, no Recovery, no fallback.
    pub confidential: bool,
    /// Lanes (e.g. `telegram:12345`) that are confidential when `confidential` is off.
    pub confidential_lanes: Vec<String>,
    /// Also write each capsule to `<export_dir>/handoff-<lane>.md` for file-based watchdogs.
    pub export_dir: Option<PathBuf>,
    /// A build holds its lane's slot at most this long (a crashed replica's claim expires).
    pub build_timeout_secs: u64,
}

impl Default for HandoffConfig {
    fn default() -> Self {
        HandoffConfig {
            enabled: true,
            inject: true,
            writer: Vec::new(),
            confidential: false,
            confidential_lanes: Vec::new(),
            export_dir: None,
            build_timeout_secs: 900,
        }
    }
}

impl HandoffConfig {
    pub fn is_confidential(&self, lane: &str) -> bool {
        self.confidential || self.confidential_lanes.iter().any(|l| l == lane)
    }
}
