//! The reload parts that `live.rs` wires beyond the first three: each says which keys it owns
//! (the reloader names every other changed key as needing a restart) and hands the new
//! configuration to the thing that owns the behaviour. Must not: claim a key it does not apply.

use std::sync::Arc;

use crate::adapters::running::Running;
use crate::agent::mcp::McpManager;
use crate::lanes::budget_events::BudgetNotices;
use crate::lanes::Approvals;
use crate::reload::Part;

/// `[[mcp.servers]]`: only changed servers restart, added ones start, removed ones stop.
pub(super) fn mcp(mcp: Arc<McpManager>) -> Part {
    Part {
        name: "mcp servers",
        owns: Box::new(|k| k == "mcp" || k.starts_with("mcp.")),
        apply: Box::new(move |c| {
            let done = mcp.apply(&c.mcp.servers);
            tracing::info!(
                kept = ?done.kept,
                started = ?done.started,
                restarted = ?done.restarted,
                stopped = ?done.stopped,
                "mcp servers reloaded"
            );
            Box::pin(async { Ok(()) })
        }),
    }
}

/// The keys the approval desk and the budget approvers' notices read: who a `[[people]]` name
/// is, `budget.approvers`, `approvals.only_requester`, and the currency and time zone the
/// notices are written in (the agents' part takes `people` and `budget.*` too: each agent's
/// budget is rebuilt).
fn people_key(k: &str) -> bool {
    matches!(
        k,
        "people"
            | "budget.approvers"
            | "approvals.only_requester"
            | "budget.currency"
            | "budget.timezone"
    )
}

/// `[[people]]` as the approvals read them (a linked chat, budget approvers by name).
pub(super) fn people(approvals: Approvals, notices: Arc<BudgetNotices>) -> Part {
    Part {
        name: "approvals' people",
        owns: Box::new(people_key),
        apply: Box::new(move |c| {
            approvals.replace(&c);
            notices.replace(&c);
            Box::pin(async { Ok(()) })
        }),
    }
}

/// A live adapter whose own table changed stops and reconnects with the new settings.
pub(super) fn adapters(running: Arc<Running>) -> Part {
    let owner = running.owner();
    Part {
        name: "adapters",
        owns: Box::new(owner),
        apply: Box::new(move |c| {
            let running = running.clone();
            Box::pin(async move { running.apply(c).await.map(|_| ()) })
        }),
    }
}
