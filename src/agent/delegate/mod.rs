//! Child agents: the `delegate` tool hands a goal (or a batch of goals) to fresh agents that
//! start with none of the conversation's history, work with a smaller toolbox, and report back
//! a summary. The parent sees the call and the summaries, never the children's tool calls:
//! delegation is context isolation, and the parent pays for a summary, not a transcript.
//!
//! [`Delegate`] is registered like every built-in (`herald tools list` shows it, the approval
//! policy sees it, a retried turn recalls its kept result), but a call needs the turn's model
//! chain, so the turn loop's dispatcher runs it through [`Children`], a per-call tool holding
//! the chain, the parent's tools and the parent turn's meter ([`run`](self::run)).
//!
//! What a child never gets ([`child_tools`]): `delegate` (no fan-out), `memory` and
//! `skill_manage` (no racing on shared long-term state), `send_message` (no side effects the
//! parent cannot see), `cron` (no work outliving the turn in the parent's name), `attach_file`
//! (a child has no reply to attach to), and any tool the policy would ask a person about or
//! refuse (a child never asks anyone).
//!
//! With `agent`, the children run as that agent of the live roster ([`target`]): its model
//! chain, its prompt, and only the tools both it and the caller are offered, under the caller's
//! meter (the caller's caps apply, its ledger rows say `child`).

mod run;
mod target;

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::tools::{Check, Tool, ToolContext, ToolError, Tools};
use crate::llm::ToolSpec;
use crate::store::Store;

pub use run::{wire, Children};
pub use target::target;

/// The tool's name.
pub const NAME: &str = "delegate";
/// Goals one call may hand out.
pub const MAX_GOALS: usize = 10;
/// The floor of a summary's share of the context: a batch never cuts a summary to noise.
pub const MIN_SUMMARY_CHARS: usize = 2_000;
/// A batch's summaries together when the model's window is unknown.
pub const UNKNOWN_WINDOW_CHARS: usize = 16_000;
/// Characters per token when a token budget becomes a character budget.
const CHARS_PER_TOKEN: usize = 4;
/// Tools a child never gets, by name (beyond `delegate` itself and anything that asks).
const STRIPPED: &[&str] = &[
    "memory",
    "skill_manage",
    "send_message",
    "cron",
    "attach_file",
];

/// `tools.delegate_max_parallel` and `tools.delegate_max_iterations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Children of one batch running at once.
    pub max_parallel: usize,
    /// Model turns one child may take before it must answer.
    pub max_iterations: u32,
}

/// The registered `delegate` tool: its schema, its limits, and the store that remembers which
/// delegations were started (a crash mid-delegation is reported, not run twice).
pub struct Delegate {
    pub limits: Limits,
    pub store: Arc<dyn Store>,
    /// The live roster a call's `agent` names an agent of (`None`: no named agents here).
    pub agents: Option<Arc<crate::agent::roster::LiveAgents>>,
}

/// One goal of a call.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Goal {
    pub goal: String,
    #[serde(default)]
    pub context: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum GoalArg {
    Text(String),
    Full(Goal),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    goal: Option<String>,
    context: Option<String>,
    goals: Option<Vec<GoalArg>>,
    /// The agent the children run as (checked by [`target`]).
    #[serde(default, rename = "agent")]
    _agent: Option<serde_json::Value>,
}

/// The goals of a call, in order: `goal` (+ `context`), or `goals` (strings or objects; a
/// `context` beside them is given to each goal that has none of its own).
pub fn goals(arguments: &str) -> Result<Vec<Goal>, ToolError> {
    let bad = |m: &str| ToolError::BadArguments(m.to_string());
    let args: Args = serde_json::from_str(if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    })
    .map_err(|e| ToolError::BadArguments(format!("the arguments do not parse: {e}")))?;
    let shared = args.context.filter(|c| !c.trim().is_empty());
    let list: Vec<Goal> = match (args.goal, args.goals) {
        (Some(goal), None) => vec![Goal {
            goal,
            context: shared,
        }],
        (None, Some(list)) => list
            .into_iter()
            .map(|g| match g {
                GoalArg::Text(goal) => Goal {
                    goal,
                    context: shared.clone(),
                },
                GoalArg::Full(mut g) => {
                    g.context = g.context.or_else(|| shared.clone());
                    g
                }
            })
            .collect(),
        _ => return Err(bad("give either `goal` or `goals`")),
    };
    if list.is_empty() {
        return Err(bad("`goals` is empty"));
    }
    if list.len() > MAX_GOALS {
        return Err(ToolError::BadArguments(format!(
            "at most {MAX_GOALS} goals in one call"
        )));
    }
    if list.iter().any(|g| g.goal.trim().is_empty()) {
        return Err(bad("a goal is empty"));
    }
    Ok(list)
}

impl Delegate {
    /// The named agents of the live roster, with their one-line descriptions.
    pub fn named_agents(&self) -> Vec<(String, String)> {
        let Some(live) = &self.agents else {
            return Vec::new();
        };
        live.current()
            .all()
            .filter(|a| !a.is_default())
            .map(|a| (a.name.clone(), a.description()))
            .collect()
    }

    /// What each summary of a call may take of the parent's context: half of the headroom the
    /// parent still has (`headroom` tokens; `None` when the window is unknown), divided across
    /// the batch, never below [`MIN_SUMMARY_CHARS`]. Longer summaries reach the parent as a
    /// preview and are paged from the turn's spill.
    pub fn budget_chars(&self, headroom: Option<usize>, arguments: &str) -> usize {
        let n = goals(arguments).map(|g| g.len()).unwrap_or(1);
        summary_chars(headroom, n)
    }
}

/// [`Delegate::budget_chars`] for a batch of `n`.
pub fn summary_chars(headroom: Option<usize>, n: usize) -> usize {
    let total = match headroom {
        Some(tokens) => tokens / 2 * CHARS_PER_TOKEN,
        None => UNKNOWN_WINDOW_CHARS,
    };
    (total / n.max(1)).max(MIN_SUMMARY_CHARS)
}

/// A child's toolbox: the parent's, less what a child never gets.
pub fn child_tools(parent: &Tools) -> Tools {
    let policy = parent.policy().clone();
    parent.without(|t| {
        let name = t.spec().name;
        STRIPPED.contains(&name.as_str())
            || t.delegation().is_some()
            || policy.check(&name, t.requires_approval()) != Check::Run
    })
}

/// The tool's schema (shared by [`Delegate`] and [`Children`]); `agents` lists the named
/// agents a call may hand its goals to (name and description).
fn spec(limits: Limits, agents: &[(String, String)]) -> ToolSpec {
    let mut parameters = json!({
        "type": "object",
        "properties": {
            "goal": {"type": "string", "description": "one task, stated completely"},
            "context": {"type": "string", "description": "what the child needs to know (given to every goal without its own)"},
            "goals": {
                "type": "array",
                "maxItems": MAX_GOALS,
                "description": "several tasks, each a string or {goal, context}",
                "items": {"anyOf": [
                    {"type": "string"},
                    {"type": "object", "properties": {"goal": {"type": "string"}, "context": {"type": "string"}}, "required": ["goal"]}
                ]}
            }
        }
    });
    let mut description = base_description(limits);
    if !agents.is_empty() {
        let names: Vec<&str> = agents.iter().map(|(n, _)| n.as_str()).collect();
        parameters["properties"]["agent"] = json!({
            "type": "string",
            "enum": names,
            "description": "run the children as this agent (its model, prompt and tools)"
        });
        description.push_str(
            " With `agent`, the children run as that agent (its model, prompt and the tools \
             you both have), on your budget. Agents:",
        );
        for (name, about) in agents {
            description.push_str(&format!(" {name} ({about});"));
        }
    }
    ToolSpec {
        name: NAME.into(),
        description,
        parameters,
    }
}

fn base_description(limits: Limits) -> String {
    format!(
        "Hand a self-contained task to a child agent (`goal`), or several at once (`goals`, \
             run side by side, {} at a time). A child starts fresh: it sees none of this \
             conversation, only its goal and the `context` you pass, so put everything it \
             needs there. It has your tools except delegate, memory, messaging, scheduling and \
             anything that needs a person's approval, and at most {} steps. You get back each \
             child's summary. A summary is the child's own report, not a verified fact: check \
             anything that matters before relying on it or telling the person.",
        limits.max_parallel, limits.max_iterations
    )
}

#[async_trait]
impl Tool for Delegate {
    fn spec(&self) -> ToolSpec {
        spec(self.limits, &self.named_agents())
    }

    fn delegation(&self) -> Option<&Delegate> {
        Some(self)
    }

    /// Only the turn loop runs a delegation (it holds the model chain); a call from anywhere
    /// else is refused.
    async fn call(&self, _ctx: &ToolContext, _arguments: &str) -> Result<String, ToolError> {
        Err(ToolError::Failed(
            "delegate runs only inside a conversation turn".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_goal_or_a_batch_and_the_shared_context_reaches_each() {
        let one = goals(r#"{"goal":"find the bug","context":"repo is x"}"#).unwrap();
        assert_eq!(
            one,
            [Goal {
                goal: "find the bug".into(),
                context: Some("repo is x".into())
            }]
        );
        let batch =
            goals(r#"{"goals":["a",{"goal":"b","context":"own"}],"context":"shared"}"#).unwrap();
        assert_eq!(batch[0].context.as_deref(), Some("shared"));
        assert_eq!(batch[1].context.as_deref(), Some("own"));
        for bad in [
            "{}",
            r#"{"goal":"a","goals":["b"]}"#,
            r#"{"goals":[]}"#,
            r#"{"goal":"  "}"#,
            "not json",
            r#"{"goal":"a","extra":1}"#,
        ] {
            assert!(goals(bad).is_err(), "{bad}");
        }
        // Half the headroom, split across the batch, floored.
        assert_eq!(summary_chars(Some(30_000), 3), 20_000);
        assert_eq!(summary_chars(Some(1_000), 3), MIN_SUMMARY_CHARS);
        assert_eq!(summary_chars(None, 2), UNKNOWN_WINDOW_CHARS / 2);
        let many = format!(r#"{{"goals":{:?}}}"#, vec!["g"; MAX_GOALS + 1]);
        assert!(goals(&many).is_err());
    }
}
