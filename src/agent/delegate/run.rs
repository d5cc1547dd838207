//! Running one `delegate` call: its children side by side under the parallel cap, each a fresh
//! turn of the agent loop; their summaries as one JSON result; and the marker that keeps a
//! crash from running a delegation twice.
//!
//! The marker is a kv row keyed by the call's name across retries of its turn (lane, inbox id,
//! call index, a hash of the arguments), written before the first child starts. A retried turn
//! first gets the result the gate kept for the call (`run_unasked`); only when the earlier
//! attempt died before that result was kept does it reach the marker, and then it reports the
//! children's outcome as unknown instead of running them again.

use std::future::Future;
use std::pin::Pin;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tracing::Instrument;

use super::{goals, spec, Delegate, Goal};
use crate::agent::context::spill::TurnSpill;
use crate::agent::roster::Agent;
use crate::agent::tools::{DenyAll, Tool, ToolContext, ToolError, ToolOutput, Tools};
use crate::agent::turn::{run_turn, TurnError, TurnInput, TurnOutput};
use crate::llm::{ProviderChain, ToolSpec};
use crate::media::images::HistoryImages;

/// What the parent is told about every summary.
const NOTE: &str = "Each summary is the child agent's own report, not a verified fact.";
const UNKNOWN: &str = "this child was started before a restart and its outcome is unknown; it \
                       was not run again (check its effects yourself before repeating it)";

/// One `delegate` call with what it needs of its turn; the dispatcher hands it to the policy
/// and the approval gate like any tool.
pub struct Children<'a, 'i> {
    pub delegate: &'a Delegate,
    pub chain: &'a ProviderChain,
    /// The child's toolbox ([`super::child_tools`]).
    pub tools: Tools,
    pub parent: &'a TurnInput<'i>,
    /// What each summary may take of the parent's context (see [`Delegate::budget_chars`]).
    pub budget_chars: usize,
    /// The parent turn's span: each child is traced under it.
    pub span: tracing::Span,
}

type ChildTurn<'f> = Pin<Box<dyn Future<Output = Result<TurnOutput, TurnError>> + Send + 'f>>;

impl Children<'_, '_> {
    /// One child: a fresh conversation with the focused prompt, the child toolbox, nobody to
    /// ask, its own iteration cap, and the parent turn's meter. As `agent` (when the call named
    /// one): that agent's chain, persona and `tools` (its filter over the child toolbox).
    async fn child(
        &self,
        ctx: &ToolContext,
        goal: &Goal,
        agent: Option<&Agent>,
        tools: &Tools,
    ) -> Value {
        let task_id = uuid::Uuid::new_v4().simple().to_string();
        let system = match agent {
            Some(a) => format!("{}{}", super::target::persona(a), prompt(goal)),
            None => prompt(goal),
        };
        let chain = agent.map_or(self.chain, |a| &a.chain);
        let child_ctx = ToolContext {
            turn_id: None,
            inbox_id: None,
            call_index: 0,
            turn_files: Vec::new(),
            ..ctx.clone()
        };
        let images = HistoryImages::default();
        let p = self.parent;
        let child_meter = p.meter.and_then(|m| m.child());
        let input = TurnInput {
            system_prompt: &system,
            history: &[],
            user_content: &goal.goal,
            user_api_content: None,
            user_parts: &[],
            history_images: &images,
            max_iterations: self.delegate.limits.max_iterations,
            session_id: p.session_id,
            spill_chars: p.spill_chars,
            tool_ctx: &child_ctx,
            approvals: &DenyAll,
            sink: None,
            steer: None,
            meter: child_meter.as_deref().or(p.meter),
            in_turn: p.in_turn,
            progress: None,
            vision: p.vision,
            media_cache: p.media_cache,
        };
        let span = tracing::info_span!(parent: &self.span, "agent.child", task_id = %task_id,
            agent = agent.map_or("", |a| a.name.as_str()));
        // The child's loop may reach this tool's dispatcher again: boxed, so the future has
        // a size (the child's toolbox holds no `delegate`, so it never does).
        let turn: ChildTurn<'_> = Box::pin(run_turn(chain, tools, input));
        match turn.instrument(span).await {
            Ok(out) => {
                tracing::info!(task_id = %task_id, model_calls = out.model_calls, "child agent done");
                json!({"goal": goal.goal, "summary": out.reply, "model_calls": out.model_calls})
            }
            Err(e) => {
                tracing::warn!(task_id = %task_id, error = %e, "child agent failed");
                json!({"goal": goal.goal, "error": format!("the child agent failed: {e}")})
            }
        }
    }

    /// The kv key naming this call across retries of its turn; `None` outside a turn that
    /// answers an inbox row (nothing retries it).
    fn marker(ctx: &ToolContext, arguments: &str) -> Option<String> {
        let inbox = ctx.inbox_id?;
        let hash = hex::encode(Sha256::digest(arguments.as_bytes()));
        Some(format!(
            "delegate:{}:{inbox}:{}:{}",
            ctx.lane.as_str(),
            ctx.call_index,
            &hash[..16]
        ))
    }
}

/// The child's system prompt: who it is, what it cannot do, the goal and the context passed.
fn prompt(goal: &Goal) -> String {
    let mut p = String::from(
        "You are a child agent. Another agent handed you one task and will read only your final \
         answer. You start with no conversation history and cannot ask anyone anything: work \
         with the tools you have, then answer with a concise report of what you found or did, \
         and what you could not do or verify. Plain text, no greeting.\n\n## Task\n",
    );
    p.push_str(goal.goal.trim());
    if let Some(c) = goal.context.as_deref() {
        p.push_str("\n\n## Context from the agent that delegated\n");
        p.push_str(c.trim());
    }
    p
}

#[async_trait]
impl Tool for Children<'_, '_> {
    fn spec(&self) -> ToolSpec {
        spec(self.delegate.limits, &self.delegate.named_agents())
    }

    async fn call(&self, ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        let goals = goals(arguments)?;
        let agent = super::target(self.delegate, arguments)?;
        let tools = match &agent {
            Some(a) => a.tools(&self.tools),
            None => self.tools.clone(),
        };
        let marker = Self::marker(ctx, arguments);
        if let Some(key) = &marker {
            match self.delegate.store.kv_get(key).await {
                Ok(Some(_)) => {
                    tracing::warn!(key = %key, "a delegation cut off by a restart is reported, not run again");
                    let children: Vec<Value> = goals
                        .iter()
                        .map(|g| json!({"goal": g.goal, "outcome": "unknown", "error": UNKNOWN}))
                        .collect();
                    return Ok(json!({"note": NOTE, "children": children}).to_string());
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "cannot read a delegation marker"),
            }
            let started = crate::store::now_ms().to_string();
            if let Err(e) = self.delegate.store.kv_set(key, &started).await {
                tracing::warn!(error = %e, "cannot record a delegation's start; a crash now would run it again");
            }
        }
        metrics::counter!("herald_delegations_total").increment(1);
        metrics::counter!("herald_child_agents_total").increment(goals.len() as u64);
        let parallel = self.delegate.limits.max_parallel.max(1);
        let runs: Vec<_> = goals
            .iter()
            .map(|g| self.child(ctx, g, agent.as_deref(), &tools))
            .collect();
        let children: Vec<Value> = futures::stream::iter(runs)
            .buffered(parallel)
            .collect()
            .await;
        Ok(json!({"note": NOTE, "children": children}).to_string())
    }

    async fn call_output(
        &self,
        ctx: &ToolContext,
        arguments: &str,
    ) -> Result<ToolOutput, ToolError> {
        self.call(ctx, arguments).await.map(ToolOutput::text)
    }
}

/// What the parent's next request shows of a delegation's result: each summary longer than
/// `budget` chars becomes a preview paged from the turn's spill. `None` when `result` is not
/// a delegation's result (a refusal, an error): it is shown like any tool's.
pub fn wire(result: &str, budget: usize, spill: &mut TurnSpill<'_>) -> Option<String> {
    let mut v: Value = serde_json::from_str(result).ok()?;
    let children = v.get_mut("children")?.as_array_mut()?;
    let mut changed = false;
    for c in children.iter_mut() {
        let Some(summary) = c.get("summary").and_then(Value::as_str) else {
            continue;
        };
        if summary.chars().count() > budget {
            let shown = spill.hold(summary, budget);
            c["summary"] = Value::String(shown);
            changed = true;
        }
    }
    Some(if changed {
        v.to_string()
    } else {
        result.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_past_its_share_is_a_preview_paged_from_the_turn_spill() {
        let long = format!("START {} END", "x".repeat(5_000));
        let result = json!({"note": NOTE, "children": [
            {"goal": "a", "summary": "short"},
            {"goal": "b", "summary": long},
            {"goal": "c", "error": "the child agent failed: boom"},
        ]})
        .to_string();
        let mut spill = TurnSpill::new("s1", 10_000);
        let shown = wire(&result, 2_000, &mut spill).unwrap();
        let v: Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(v["children"][0]["summary"], "short");
        let preview = v["children"][1]["summary"].as_str().unwrap();
        assert!(
            preview.starts_with("[Large tool result: 5010 characters"),
            "{preview}"
        );
        assert!(preview.contains("around_message_id=-1") && preview.contains("START"));
        assert!(preview.chars().count() < 2_000 + 400, "{}", preview.len());
        assert_eq!(v["children"][2]["error"], "the child agent failed: boom");
        // The whole summary pages back in from the turn's spill.
        let page = spill
            .page(
                "session_search",
                r#"{"session_id":"s1","around_message_id":-1,"offset":0}"#,
            )
            .unwrap();
        assert!(page.contains("START") && page.contains("x"), "{page}");
        // Within budget: the bytes as they were; not a delegation's result: not handled here.
        assert_eq!(wire(&result, 10_000, &mut spill).unwrap(), result);
        assert!(wire("refused: no", 2_000, &mut spill).is_none());
    }
}
