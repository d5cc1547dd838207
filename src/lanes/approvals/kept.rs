//! Results kept across retries of one turn for calls that needed no approval: a turn the store
//! refused to commit (or a crash) runs again, and the model usually makes the same calls; a
//! call at the same position with the same tool and arguments gets the result its earlier
//! attempt recorded instead of running the tool a second time (a refund, a sent mail, a
//! deleted order must not happen twice). Approved calls have their own record (`gate.rs`).
//!
//! Must not: hand one event's result to another event, or to another call of the same turn
//! (the key is lane, inbox event, call position and a hash of tool and arguments).

use sha2::{Digest, Sha256};

use crate::agent::tools::{ApprovalRequest, Tool, ToolContext, ToolError, ToolOutput};
use crate::domain::MessageEvent;
use crate::store::{now_ms, NewApproval, Store};

/// The key of one call of one turn: the same for every attempt of that turn.
pub(super) fn call_hash(req: &ApprovalRequest) -> String {
    hex::encode(Sha256::digest(
        format!("{}\n{}", req.tool, req.arguments).as_bytes(),
    ))
}

/// Runs `tool` unless an earlier attempt of this turn kept a result for the same call. Only
/// the text is kept: a recalled result brings no files (a tool that attaches to the reply
/// says [`Tool::repeat_on_retry`] and runs again).
pub(super) async fn run(
    store: &dyn Store,
    ev: &MessageEvent,
    ctx: &ToolContext,
    req: &ApprovalRequest,
    tool: &dyn Tool,
) -> Result<ToolOutput, ToolError> {
    let Some(inbox_id) = ctx.inbox_id.filter(|_| !tool.repeat_on_retry()) else {
        return tool.call_output(ctx, &req.arguments).await;
    };
    let key = NewApproval {
        id: uuid::Uuid::new_v4().simple().to_string(),
        lane: ctx.lane.clone(),
        inbox_id,
        call_index: req.call_index as i64,
        call_hash: call_hash(req),
        tool: req.tool.clone(),
        arguments: req.arguments.clone(),
        person: ctx.person.clone(),
        platform: ev.platform.as_str().to_string(),
        chat_id: ev.chat_id.clone(),
        thread_id: ev.thread_id.clone(),
        deadline: 0,
        now: now_ms(),
    };
    match store.tool_result_recall(&key).await {
        Ok(Some(kept)) => {
            metrics::counter!("herald_tool_results_reused_total").increment(1);
            tracing::info!(tool = %req.tool, call_index = req.call_index,
                "tool call not repeated: an earlier attempt of this turn kept its result");
            return Ok(ToolOutput::text(kept));
        }
        Ok(None) => {}
        // Unreadable record: the call runs, as it would have before records existed.
        Err(e) => tracing::warn!(error = %e, "cannot read a kept tool result; calling the tool"),
    }
    let result = tool.call_output(ctx, &req.arguments).await;
    // Only a result is kept: a failed call changed nothing the model can rely on, and trying
    // it again on a retry is what the model would do anyway.
    if let Ok(out) = &result {
        if let Err(e) = store.tool_result_keep(&key, &out.text).await {
            tracing::warn!(error = %e, "cannot keep a tool result for a retry of the turn");
        }
    }
    result
}
