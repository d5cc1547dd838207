//! The built-in tools a configuration offers and the approval policy it sets: one function each,
//! shared by the daemon (`app.rs`) and `herald tools list`, so the list an operator is shown is
//! the list the model gets.

use std::sync::Arc;

use anyhow::Context;

use super::{Policy, SessionSearch, Tool};
use crate::config::Config;
use crate::store::Store;

/// The approval policy of `[approvals]` and `tools.require_approval`, built once at startup.
pub fn approval_policy(config: &Config) -> anyhow::Result<Policy> {
    Policy::from_config(config).context("approvals: a tool-name pattern does not compile")
}

/// The built-in tools of the agent layer this configuration offers. `cron` and
/// `send_message` act beyond the conversation and are built next to the scheduler and the
/// lanes (`app.rs`); [`lane_builtins`] names them for listings.
pub fn builtin_tools(config: &Config, store: Arc<dyn Store>) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(SessionSearch { store })];
    if config.memory.enabled {
        tools.push(Arc::new(crate::agent::memory::tool::MemoryTool {
            files: crate::agent::memory::MemoryFiles::from_config(config),
            people: config.people.clone(),
        }));
    }
    // Skills need a directory to live in; without one the model is not offered the tool.
    let skills = crate::agent::prompt::skills_dir(config);
    if skills.is_dir() {
        tools.push(Arc::new(crate::agent::skills::SkillView {
            dir: skills.clone(),
        }));
        if config.agent.skill_manage {
            tools.push(Arc::new(crate::agent::skill_manage::SkillManage {
                dir: skills,
            }));
        }
    }
    tools
}

/// The built-ins `app.rs` adds beyond [`builtin_tools`], by name, as this configuration
/// offers them.
pub fn lane_builtins(config: &Config) -> Vec<&'static str> {
    let mut names = Vec::new();
    if config.tools.cron {
        names.push("cron");
    }
    if config.tools.send_message && !config.tools.send_message_routes.is_empty() {
        names.push("send_message");
    }
    names
}
