//! The approval policy a configuration sets, built once at startup by the daemon and by
//! `herald tools list`. The built-in tools themselves are assembled in `crate::toolset`, which
//! can reach the two that live above this layer (`cron`, `send_message`).

use anyhow::Context;

use super::Policy;
use crate::config::Config;

/// The approval policy of `[approvals]` and `tools.require_approval`, built once at startup.
pub fn approval_policy(config: &Config) -> anyhow::Result<Policy> {
    Policy::from_config(config).context("approvals: a tool-name pattern does not compile")
}
