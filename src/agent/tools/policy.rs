//! Which tool calls run, which wait for a person, and which never run — decided in one
//! function, in a fixed order.
//!
//! The order is the security design: the operator's deny list first, then the hardline floor
//! (tool names that always ask, whatever else is configured), and only then the bypass switch,
//! then the tool's own `require_approval`. The bypass is read once, when the policy is built
//! at startup, and kept in a field nothing can write afterwards: nothing the model causes at
//! runtime (a tool, a skill, a written file) can switch approvals off for this process.
//!
//! Asking is the [`ApprovalGate`]'s job (the lane worker's durable implementation asks in the
//! person's own chat). Where there is no one to ask — a scheduled run, a missing gate — the
//! answer is no: missing approval state means deny.

use async_trait::async_trait;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::{Origin, Tool, ToolContext, ToolError, ToolOutput};
use crate::config::{Config, DEFAULT_HARDLINE};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Run,
    /// Ask the person first; `hardline` when the floor, not configuration, demands it.
    Ask {
        hardline: bool,
    },
    Refuse(String),
}

#[derive(Debug, Clone)]
pub struct Policy {
    bypass: bool,
    hardline: GlobSet,
    deny: GlobSet,
    /// Built-in tools the operator wants asked about (`tools.require_approval`).
    require: GlobSet,
}

impl Default for Policy {
    /// The floor alone: no deny list, no bypass.
    fn default() -> Policy {
        Policy::new(false, DEFAULT_HARDLINE, &[] as &[&str]).expect("default patterns compile")
    }
}

impl Policy {
    /// Built once at startup from `[approvals]`; patterns are globs over tool names, matched
    /// case-insensitively.
    pub fn new(
        bypass: bool,
        hardline: &[impl AsRef<str>],
        deny: &[impl AsRef<str>],
    ) -> Result<Policy, globset::Error> {
        Ok(Policy {
            bypass,
            hardline: globs(hardline)?,
            deny: globs(deny)?,
            require: GlobSet::empty(),
        })
    }

    /// The policy of `[approvals]` and `tools.require_approval`, built once at startup.
    pub fn from_config(config: &Config) -> Result<Policy, globset::Error> {
        let mut p = Policy::new(
            config.approvals.bypass,
            &config.approvals.hardline,
            &config.approvals.deny,
        )?;
        p.require = globs(&config.tools.require_approval)?;
        Ok(p)
    }

    pub fn bypass(&self) -> bool {
        self.bypass
    }

    /// What happens to a call of `tool`, whose owner `requires` approval or not.
    pub fn check(&self, tool: &str, requires: bool) -> Check {
        if self.deny.is_match(tool) {
            return Check::Refuse(format!("the operator does not allow the tool {tool:?}"));
        }
        if self.hardline.is_match(tool) {
            return Check::Ask { hardline: true };
        }
        if self.bypass {
            return Check::Run;
        }
        if requires || self.require.is_match(tool) {
            return Check::Ask { hardline: false };
        }
        Check::Run
    }
}

impl Policy {
    /// What happens to a call and why, in the words `herald tools list` prints: the check, and
    /// the rule that decided it (`approvals.deny`, `approvals.hardline`, `approvals.bypass`,
    /// the tool's own reason such as `destructive hint` or `config`, `tools.require_approval`).
    pub fn explain(&self, tool: &dyn Tool) -> (Check, String) {
        let name = tool.spec().name;
        let requires = tool.requires_approval();
        let check = self.check(&name, requires);
        let why = match &check {
            Check::Refuse(_) => "approvals.deny".to_string(),
            Check::Ask { hardline: true } => "approvals.hardline".to_string(),
            Check::Run if self.bypass && (requires || self.require.is_match(&name)) => {
                "approvals.bypass".to_string()
            }
            Check::Run => String::new(),
            // A built-in asks of itself only because `tools.require_approval` names it.
            Check::Ask { hardline: false } if requires => {
                tool.approval_reason()
                    .unwrap_or_else(|| match tool.origin() {
                        Origin::Builtin => "tools.require_approval".to_string(),
                        Origin::Mcp(_) => "config".to_string(),
                    })
            }
            Check::Ask { hardline: false } => "tools.require_approval".to_string(),
        };
        (check, why)
    }
}

fn globs(patterns: &[impl AsRef<str>]) -> Result<GlobSet, globset::Error> {
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        set.add(
            GlobBuilder::new(p.as_ref())
                .case_insensitive(true)
                .literal_separator(false)
                .build()?,
        );
    }
    set.build()
}

/// One call waiting for a person's word.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    pub tool: String,
    pub origin: Origin,
    /// The arguments exactly as the model wrote them (shown to the person, capped).
    pub arguments: String,
    /// The call's position within the turn: with the inbox id it names the call across a
    /// retry of the turn after a crash.
    pub call_index: usize,
    pub hardline: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// `by` is the sender identity that pressed Approve.
    Approved { by: String },
    /// The reason the model reads ("denied by the person", "no answer within 300 seconds").
    Denied { reason: String },
}

#[async_trait]
pub trait ApprovalGate: Send + Sync {
    /// Asks (or, after a restart, resumes asking) and waits for the answer or the deadline.
    async fn decide(&self, ctx: &ToolContext, req: &ApprovalRequest) -> Decision;

    /// Runs an approved call at most once: a retry of the turn gets the recorded result, and a
    /// call cut off by a crash is reported, not repeated.
    async fn run_once(
        &self,
        ctx: &ToolContext,
        req: &ApprovalRequest,
        tool: &dyn Tool,
    ) -> Result<ToolOutput, ToolError>;

    /// Runs a call the policy lets through without asking. A gate that keeps results returns
    /// the one an earlier attempt of the same turn recorded for this call instead of running
    /// the tool again (a retried turn must not repeat a side effect it already caused).
    /// No default: a gate that wraps another must forward this, or retries repeat side effects.
    async fn run_unasked(
        &self,
        ctx: &ToolContext,
        req: &ApprovalRequest,
        tool: &dyn Tool,
    ) -> Result<ToolOutput, ToolError>;
}

/// The gate where there is no one to ask: every call that needs approval is denied.
pub struct DenyAll;

#[async_trait]
impl ApprovalGate for DenyAll {
    async fn decide(&self, _ctx: &ToolContext, _req: &ApprovalRequest) -> Decision {
        Decision::Denied {
            reason: "there is no one to approve it here".into(),
        }
    }

    async fn run_once(
        &self,
        _ctx: &ToolContext,
        _req: &ApprovalRequest,
        _tool: &dyn Tool,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Denied(
            "there is no one to approve it here".into(),
        ))
    }

    /// Nothing is kept where no one answers: the call runs as it comes.
    async fn run_unasked(
        &self,
        ctx: &ToolContext,
        req: &ApprovalRequest,
        tool: &dyn Tool,
    ) -> Result<ToolOutput, ToolError> {
        tool.call_output(ctx, &req.arguments).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_is_deny_then_floor_then_bypass_then_the_tools_own_word() {
        let p = Policy::new(true, DEFAULT_HARDLINE, &["shop__refund_all"]).unwrap();
        assert!(matches!(
            p.check("shop__refund_all", false),
            Check::Refuse(_)
        ));
        // The floor holds even with the bypass on.
        assert_eq!(
            p.check("shop__delete_order", false),
            Check::Ask { hardline: true }
        );
        assert_eq!(
            p.check("SHOP__DROP_TABLE", false),
            Check::Ask { hardline: true }
        );
        // Bypass on: a tool that asks for approval runs.
        assert_eq!(p.check("shop__refund", true), Check::Run);

        let strict = Policy::new(false, DEFAULT_HARDLINE, &[] as &[&str]).unwrap();
        assert_eq!(
            strict.check("shop__refund", true),
            Check::Ask { hardline: false }
        );
        assert_eq!(strict.check("shop__lookup", false), Check::Run);
        assert_eq!(strict.check("session_search", false), Check::Run);
        assert_eq!(strict.check("skill_manage", false), Check::Run);
    }
}
