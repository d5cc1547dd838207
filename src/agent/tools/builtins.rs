//! The built-in tools a configuration offers and the approval policy it sets: one function each,
//! shared by the daemon (`app.rs`) and `herald tools list`, so the list an operator is shown is
//! the list the model gets.

use std::sync::Arc;

use anyhow::Context;

use super::{Policy, SessionSearch, Tool};
use crate::config::Config;
use crate::store::Store;

/// The approval policy of `[approvals]`, built once at startup.
pub fn approval_policy(config: &Config) -> anyhow::Result<Policy> {
    Policy::new(
        config.approvals.bypass,
        &config.approvals.hardline,
        &config.approvals.deny,
    )
    .context("approvals: a tool-name pattern does not compile")
}

/// The built-in tools this configuration offers.
pub fn builtin_tools(config: &Config, store: Arc<dyn Store>) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(SessionSearch { store })];
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
