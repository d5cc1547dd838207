//! Tools the model may call: the trait, the per-turn registry the turn loop dispatches through,
//! and the catalog that builds that registry between turns.
//!
//! A tool's result is data for the model, never an error that aborts the turn: bad arguments,
//! a failing server or a refused approval come back as a short explanation the model can act
//! on ([`ToolError`]'s text).
//!
//! Every call carries a [`ToolContext`] — the lane, the person and the session it was made
//! for — and a tool reads and writes only within it. The context is not optional: a tool that
//! ignored it would have to do so visibly, and the store calls a tool makes take the lane too.
//! An id from outside the caller's lane answers exactly like an id that does not exist.
//!
//! The tool list sits inside the cached prompt prefix, so it changes only between turns: the
//! catalog's [`ToolCatalog::snapshot`] is the one function that builds it (builtins plus
//! whatever the dynamic sources — MCP servers — offer right now), in name order, and a turn
//! keeps the snapshot it started with.

mod attach_file;
mod builtins;
pub mod policy;
mod session_search;
mod web;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::{Attachment, LaneKey, SessionId};
use crate::llm::{Blob, ToolSpec};

pub use attach_file::AttachFile;
pub use builtins::approval_policy;
pub use policy::{ApprovalGate, ApprovalRequest, Check, Decision, DenyAll, Policy};
pub(crate) use session_search::page;
pub use session_search::SessionSearch;
pub use web::{WebFetch, WebSearch};

/// Whom a tool call serves: the conversation it was made in, the person who asked, and the
/// session and turn it belongs to. Built by the lane worker from the event it is answering,
/// never from anything the model wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    pub lane: LaneKey,
    /// The sender identity, `platform:sender_id` (e.g. `telegram:123`).
    pub person: String,
    pub session_id: SessionId,
    pub turn_id: Option<i64>,
    /// The inbox row the turn answers; with [`ToolContext::call_index`] it names a call
    /// across retries of the same turn (approvals and sent messages are keyed by it).
    pub inbox_id: Option<i64>,
    /// The call's position within the turn, set by [`Tools::call`].
    pub call_index: usize,
    /// Files this turn's tool calls produced so far (cached, by reference), set by the turn
    /// loop: `attach_file` may name them before they are in the transcript.
    pub turn_files: Vec<Attachment>,
    /// The agent the turn runs as (`crate::agent::roster`): tools that keep per-agent data (memory,
    /// session search) read only that agent's.
    pub agent: String,
}

/// What a call produced: the text the model reads, files (an MCP tool's images and blobs) the
/// turn caches and shows the model, and files the call adds to the turn's reply
/// (`attach_file`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOutput {
    pub text: String,
    pub files: Vec<Blob>,
    pub attach: Vec<Attachment>,
}

impl ToolOutput {
    /// A result that is text only.
    pub fn text(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            ..ToolOutput::default()
        }
    }
}

/// Why a call produced no result. The `Display` text is what the model reads.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ToolError {
    #[error("error: {0}")]
    BadArguments(String),
    #[error("error: {0}")]
    Failed(String),
    /// The tool's server is down or went away mid-call.
    #[error("error: the tool is unavailable right now: {0}")]
    Unavailable(String),
    #[error("error: the tool did not answer within {} seconds", .0.as_secs())]
    TimedOut(Duration),
    /// A person said no, or nobody could be asked; no call was made.
    #[error("denied: {0}; the tool was not called")]
    Denied(String),
    /// Configuration forbids this tool outright; no call was made.
    #[error("refused: {0}; the tool was not called")]
    Refused(String),
}

impl ToolError {
    /// The metrics label of an outcome.
    pub fn outcome(&self) -> &'static str {
        match self {
            ToolError::BadArguments(_) => "bad_arguments",
            ToolError::Failed(_) => "error",
            ToolError::Unavailable(_) => "unavailable",
            ToolError::TimedOut(_) => "timeout",
            ToolError::Denied(_) => "denied",
            ToolError::Refused(_) => "refused",
        }
    }
}

/// Where a tool comes from, for `herald tools list` and the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Builtin,
    /// An MCP server, by its configured name.
    Mcp(String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Builtin => f.write_str("builtin"),
            Origin::Mcp(server) => write!(f, "mcp:{server}"),
        }
    }
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    fn origin(&self) -> Origin {
        Origin::Builtin
    }
    /// Whether its owner's configuration asks for a person's approval before each call (the
    /// [`Policy`] may still ask for more, never for less).
    fn requires_approval(&self) -> bool {
        false
    }
    /// [`Tool::requires_approval`] for one call: a tool whose actions differ in reach (the
    /// `cron` tool asks to create a job, not to list them) decides from the arguments.
    fn requires_approval_for(&self, _arguments: &str) -> bool {
        self.requires_approval()
    }
    /// Why [`Tool::requires_approval`] is true, for `herald tools list` (`config`,
    /// `destructive hint`).
    fn approval_reason(&self) -> Option<String> {
        None
    }
    /// The tool declares that it only reads (MCP `readOnlyHint`): safe to run alongside others.
    fn read_only(&self) -> bool {
        false
    }
    async fn call(&self, ctx: &ToolContext, arguments: &str) -> Result<String, ToolError>;
    /// The call with the files it produced; a tool that returns only text need not say so.
    async fn call_output(
        &self,
        ctx: &ToolContext,
        arguments: &str,
    ) -> Result<ToolOutput, ToolError> {
        self.call(ctx, arguments).await.map(ToolOutput::text)
    }
    /// A call that changes nothing runs again when its turn is retried, instead of reusing a
    /// result an earlier attempt kept (which holds the text only, not what the call attached).
    fn repeat_on_retry(&self) -> bool {
        false
    }
    /// The limits of the `delegate` tool: its calls run child agents, which need the turn's
    /// model chain, so the turn loop runs them itself (`agent::delegate`), never through
    /// [`Tool::call`]. `None` for every other tool.
    fn delegation(&self) -> Option<&crate::agent::delegate::Delegate> {
        None
    }
}

/// Tools that come and go while the process runs (an MCP server's, while it is connected).
pub trait ToolSource: Send + Sync {
    /// The tools available right now; an empty list while the source is down.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
    /// Guidance for the prompt's tool-guidance layer, `(label, text)`, already screened and
    /// capped (an MCP server's `instructions`). Read when a session opens.
    fn guidance(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// The tools of one turn, fixed when it starts.
#[derive(Clone, Default)]
pub struct Tools {
    by_name: BTreeMap<String, Arc<dyn Tool>>,
    policy: Arc<Policy>,
}

impl Tools {
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.by_name.insert(tool.spec().name, tool);
    }

    /// The schemas sent to the model, in name order (a stable prefix for the prompt cache).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.by_name.values().map(|t| t.spec()).collect()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.by_name.values()
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name)
    }

    /// The same registry without the tools `drop` names (a child agent's toolbox).
    pub fn without(&self, drop: impl Fn(&dyn Tool) -> bool) -> Tools {
        Tools {
            by_name: self
                .by_name
                .iter()
                .filter(|(_, t)| !drop(t.as_ref()))
                .map(|(n, t)| (n.clone(), t.clone()))
                .collect(),
            policy: self.policy.clone(),
        }
    }

    /// Whether a call of `name` with `arguments` may run alongside its neighbours: a known tool
    /// that only reads, that the policy lets through without asking, with arguments that parse.
    pub fn may_overlap(&self, name: &str, arguments: &str) -> bool {
        let Some(tool) = self.by_name.get(name) else {
            return false;
        };
        let parses = arguments.trim().is_empty()
            || serde_json::from_str::<serde_json::Value>(arguments).is_ok();
        tool.read_only()
            && parses
            && self
                .policy
                .check(name, tool.requires_approval_for(arguments))
                == Check::Run
    }

    /// Runs one call through the policy and, when it says so, the person's approval. The
    /// result's text is what the model reads (a refusal or an error is its text).
    pub async fn call(
        &self,
        ctx: &ToolContext,
        gate: &dyn ApprovalGate,
        call_index: usize,
        name: &str,
        arguments: &str,
    ) -> ToolOutput {
        let Some(tool) = self.by_name.get(name) else {
            metrics::counter!("herald_tool_calls_total", "tool" => "unknown", "outcome" => "unknown_tool").increment(1);
            return ToolOutput::text(format!("error: there is no tool named {name:?}"));
        };
        self.call_as(ctx, gate, call_index, arguments, tool.as_ref())
            .await
    }

    /// [`Tools::call`] of a tool the caller holds: the same policy, approval and metrics (the
    /// turn loop runs `delegate` calls this way, with the turn's model chain in hand).
    pub async fn call_as(
        &self,
        ctx: &ToolContext,
        gate: &dyn ApprovalGate,
        call_index: usize,
        arguments: &str,
        tool: &dyn Tool,
    ) -> ToolOutput {
        let name_owned = tool.spec().name;
        let name = name_owned.as_str();
        let ctx = &ToolContext {
            call_index,
            ..ctx.clone()
        };
        let req = |hardline| ApprovalRequest {
            tool: name.to_string(),
            origin: tool.origin(),
            arguments: arguments.to_string(),
            call_index,
            hardline,
        };
        let result = match self
            .policy
            .check(name, tool.requires_approval_for(arguments))
        {
            Check::Refuse(why) => Err(ToolError::Refused(why)),
            Check::Run => gate.run_unasked(ctx, &req(false), tool).await,
            Check::Ask { hardline } => {
                let req = req(hardline);
                match gate.decide(ctx, &req).await {
                    Decision::Approved { by } => {
                        tracing::info!(tool = name, by = %by, "tool call approved");
                        gate.run_once(ctx, &req, tool).await
                    }
                    Decision::Denied { reason } => Err(ToolError::Denied(reason)),
                }
            }
        };
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.outcome(),
        };
        metrics::counter!("herald_tool_calls_total", "tool" => name.to_string(), "outcome" => outcome).increment(1);
        match result {
            Ok(output) => output,
            Err(e) => {
                tracing::info!(tool = name, outcome, error = %e, "tool call gave the model an error");
                ToolOutput::text(e.to_string())
            }
        }
    }
}

/// The builtins, the dynamic sources and the frozen policy; [`ToolCatalog::snapshot`] turns
/// them into one turn's [`Tools`].
#[derive(Clone, Default)]
pub struct ToolCatalog {
    builtins: Vec<Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
    policy: Arc<Policy>,
}

impl ToolCatalog {
    pub fn new(policy: Policy) -> ToolCatalog {
        ToolCatalog {
            builtins: Vec::new(),
            sources: Vec::new(),
            policy: Arc::new(policy),
        }
    }

    pub fn builtin(&mut self, tool: Arc<dyn Tool>) {
        self.builtins.push(tool);
    }

    pub fn source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    /// The sources' prompt guidance right now (read once when a session opens, so the
    /// session's prompt stays byte-stable).
    pub fn guidance(&self) -> Vec<(String, String)> {
        self.sources.iter().flat_map(|s| s.guidance()).collect()
    }

    /// The one function that builds a turn's tool list. Called by the lane worker before a
    /// turn, never during one. A dynamic tool whose name collides with a builtin loses (the
    /// MCP layer derives names that cannot collide; this is the last guard).
    pub fn snapshot(&self) -> Tools {
        let mut tools = Tools {
            by_name: BTreeMap::new(),
            policy: self.policy.clone(),
        };
        for source in &self.sources {
            for tool in source.tools() {
                tools.register(tool);
            }
        }
        for tool in &self.builtins {
            tools.register(tool.clone());
        }
        tools
    }
}
