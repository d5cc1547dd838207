//! What a running turn is doing right now (a model call, a tool, a wait for someone's
//! approval) and since when, so that `/status` can say it while the turn runs.
//!
//! Display state of this process only: nothing here is durable or decides anything. Another
//! replica's turn is described from the store instead (see `status.rs`).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::router::LaneRouter;
use crate::agent::tools::{
    ApprovalGate, ApprovalRequest, Decision, Tool, ToolContext, ToolError, ToolOutput,
};
use crate::agent::turn::TurnProgress;
use crate::domain::LaneKey;
use crate::store::now_ms;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Doing {
    /// Reading the session and building the request.
    Preparing,
    Model,
    Tool(String),
    Approval(String),
}

/// One running turn's current step. Shared between the worker (writes) and `/status` (reads).
pub(super) struct Activity {
    started_at: i64,
    now: Mutex<(Doing, i64)>,
}

impl Activity {
    pub(super) fn new() -> Activity {
        let t = now_ms();
        Activity {
            started_at: t,
            now: Mutex::new((Doing::Preparing, t)),
        }
    }

    fn set(&self, doing: Doing) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = (doing, now_ms());
    }

    /// One line for a person: what runs, for how long, and since when the turn runs.
    pub(super) fn describe(&self) -> String {
        let (doing, since) = self.now.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let now = now_ms();
        let what = match doing {
            Doing::Preparing => "preparing the request".to_string(),
            Doing::Model => "model call".to_string(),
            Doing::Tool(t) => format!("running the tool {t}"),
            Doing::Approval(t) => format!("waiting for approval to run {t}"),
        };
        format!(
            "Working on a message now: {what} (for {}; the turn started at {}).",
            secs(now - since),
            clock(self.started_at)
        )
    }
}

impl TurnProgress for Activity {
    fn model_call(&self) {
        self.set(Doing::Model);
    }

    fn tool_call(&self, name: &str) {
        self.set(Doing::Tool(name.to_string()));
    }
}

/// The turn's approval gate, recording the wait for an answer as the current step.
pub(super) struct ActivityGate<'a> {
    pub(super) inner: &'a dyn ApprovalGate,
    pub(super) activity: &'a Activity,
    /// Another person's words joined the turn (`lanes.mid_turn = "steer"` in a group): from
    /// then on a call that is not read-only runs only when the turn's own person approves, so
    /// nobody acts with someone else's tools, memory or rights by writing into their turn.
    pub(super) foreign: &'a std::sync::atomic::AtomicBool,
}

#[async_trait]
impl ApprovalGate for ActivityGate<'_> {
    async fn decide(&self, ctx: &ToolContext, req: &ApprovalRequest) -> Decision {
        self.activity.set(Doing::Approval(req.tool.clone()));
        let d = self.inner.decide(ctx, req).await;
        self.activity.set(Doing::Tool(req.tool.clone()));
        d
    }

    async fn run_once(
        &self,
        ctx: &ToolContext,
        req: &ApprovalRequest,
        tool: &dyn Tool,
    ) -> Result<ToolOutput, ToolError> {
        self.inner.run_once(ctx, req, tool).await
    }

    async fn run_unasked(
        &self,
        ctx: &ToolContext,
        req: &ApprovalRequest,
        tool: &dyn Tool,
    ) -> Result<ToolOutput, ToolError> {
        if self.foreign.load(std::sync::atomic::Ordering::SeqCst) && !tool.read_only() {
            return match self.decide(ctx, req).await {
                Decision::Approved { .. } => self.inner.run_once(ctx, req, tool).await,
                Decision::Denied { reason } => Err(ToolError::Denied(reason)),
            };
        }
        self.inner.run_unasked(ctx, req, tool).await
    }
}

/// The turn's entry on the router's board, removed however the turn ends (a panic too).
pub(super) struct ActivityEntry<'a> {
    router: &'a LaneRouter,
    lane: &'a LaneKey,
}

impl<'a> ActivityEntry<'a> {
    pub(super) fn insert(
        router: &'a LaneRouter,
        lane: &'a LaneKey,
        activity: Arc<Activity>,
    ) -> ActivityEntry<'a> {
        router
            .activity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(lane.clone(), activity);
        ActivityEntry { router, lane }
    }
}

impl Drop for ActivityEntry<'_> {
    fn drop(&mut self) {
        self.router
            .activity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.lane);
    }
}

pub(super) fn secs(ms: i64) -> String {
    let s = (ms.max(0) + 500) / 1000;
    if s < 120 {
        format!("{s} s")
    } else {
        format!("{} min", s / 60)
    }
}

/// A store timestamp (ms) as UTC wall-clock time.
pub(super) fn clock(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%H:%M:%S UTC").to_string())
        .unwrap_or_default()
}
