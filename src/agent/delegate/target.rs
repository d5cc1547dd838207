//! The agent a `delegate` call hands its goals to: `agent` names one of the live roster, whose
//! model chain the children call, whose prompt (soul and `system_message`) frames them, and
//! whose tool filter narrows the child toolbox. The children stay on the caller's meter and
//! the caller's `ToolContext` (lane, person, agent), so they spend under the caller's caps and
//! read nothing the caller could not.

use std::sync::Arc;

use serde_json::Value;

use super::Delegate;
use crate::agent::roster::Agent;
use crate::agent::tools::ToolError;

/// The agent `arguments` name (`None`: no `agent`, the caller's own model and prompt). An
/// unknown name is a tool error listing the agents there are.
pub fn target(delegate: &Delegate, arguments: &str) -> Result<Option<Arc<Agent>>, ToolError> {
    let name = serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|v| v.get("agent").cloned());
    let name = match name {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s,
        Some(_) => {
            return Err(ToolError::BadArguments(
                "`agent` must be an agent's name".into(),
            ))
        }
    };
    let roster = delegate.agents.as_ref().map(|l| l.current());
    if let Some(agent) = roster.as_ref().and_then(|r| r.get(&name)) {
        return Ok(Some(agent.clone()));
    }
    let names: Vec<String> = roster
        .iter()
        .flat_map(|r| r.all().map(|a| a.name.clone()).collect::<Vec<_>>())
        .collect();
    Err(ToolError::BadArguments(format!(
        "there is no agent {name:?}; the agents are: {}",
        names.join(", ")
    )))
}

/// What frames a child running as `agent`: its identity (when it has a soul file) and its
/// operator instructions, before the child's own task prompt.
pub(super) fn persona(agent: &Agent) -> String {
    let cfg = &agent.config.agent;
    let mut out = String::new();
    if cfg.soul_file.is_some() {
        let window = agent.config.llm.context_window.unwrap_or(8_192) as usize;
        let sources = crate::agent::prompt::load_sources(&agent.config, window);
        out.push_str(sources.identity.text.trim());
        out.push_str("\n\n");
    }
    if let Some(msg) = cfg.system_message.as_deref() {
        out.push_str(msg.trim());
        out.push_str("\n\n");
    }
    out
}
