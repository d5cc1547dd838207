//! `/agent`: in a private chat, which agents the person may talk to, and the switch of this
//! conversation to another one.
//!
//! The choice is the lane's `kv` row `agent:<lane>` (`roster::choice_key`), read once at the
//! start of each turn (`LiveAgents::for_turn`). A switch closes the open session of the old
//! agent, and when handoff is on a capsule of it is written first, tagged with the NEW agent,
//! so the new agent's first session carries on from it: the explicit carry-over. Must not:
//! switch to an agent the person may not use, change anything on a refused name, or run in a
//! group (one person's choice would move everyone's conversation).

use std::sync::Arc;

use async_trait::async_trait;

use crate::agent::roster::{choice_key, Agent};
use crate::domain::{LaneKey, MessageEvent, SessionId};
use crate::hooks::Authorizer;
use crate::store::{Lease, StoreError};

use super::Deps;

/// Writes the capsule of a session left by `/agent`, for the agent it switches to. The
/// handoff builder implements it (a layer above the lanes).
#[async_trait]
pub trait CarryOver: Send + Sync {
    /// True when a capsule was stored for `agent`'s next session in the lane.
    async fn carry_over(
        &self,
        ev: &MessageEvent,
        session: &SessionId,
        agent: &str,
    ) -> Result<bool, StoreError>;
}

pub const GROUP_ONLY: &str =
    "/agent works in private chats: a group talks to the agent its configuration names.";

/// The answer to `/agent` or `/agent NAME` in the conversation `lane`.
pub(super) async fn command(
    deps: &Deps,
    lease: &Lease,
    lane: &LaneKey,
    ev: &MessageEvent,
) -> Result<String, StoreError> {
    if Authorizer::in_group(ev) {
        return Ok(GROUP_ONLY.into());
    }
    let agents = deps.agents.current();
    let current = deps.agents.for_turn(&*deps.store, lane, ev).await;
    let Some(name) = ev.text.split_whitespace().nth(1) else {
        return Ok(list(&agents.switchable_for(ev), &current));
    };
    let target = agents.get(name).filter(|a| agents.may_switch(a, ev));
    let Some(target) = target else {
        tracing::info!(lane = %lane, agent = name, "/agent refused: unknown or not allowed");
        return Ok(format!(
            "There is no agent \"{name}\" you can use here; nothing changed. /agent lists \
             the ones you can."
        ));
    };
    if target.name == current.name {
        return Ok(format!("You are already talking to {}.", target.name));
    }
    deps.store.kv_set(&choice_key(lane), &target.name).await?;
    let mut carried = false;
    if let Some(open) = deps.store.session_current(lane).await? {
        if let Some(c) = &deps.carry_over {
            carried = c
                .carry_over(ev, &open.id, &target.name)
                .await
                .unwrap_or_else(|e| {
                    tracing::warn!(lane = %lane, error = %e, "no capsule for the /agent switch");
                    false
                });
        }
        deps.store.session_close(lease, &open.id, "agent").await?;
    }
    tracing::info!(lane = %lane, from = %current.name, to = %target.name, carried, "/agent switched the conversation");
    let with = if carried {
        ", with a handoff note of the earlier one"
    } else {
        ""
    };
    Ok(format!(
        "Switched to {} — {}. Your next message starts a new session with it{with}.",
        target.name,
        target.description()
    ))
}

/// The agents the person may use, the current one marked.
fn list(agents: &[&Arc<Agent>], current: &Agent) -> String {
    let mut out = String::from("Agents you can use here:");
    for a in agents {
        let mark = if a.name == current.name {
            " (current)"
        } else {
            ""
        };
        out.push_str(&format!("\n• {}{mark} — {}", a.name, a.description()));
    }
    if !agents.iter().any(|a| a.name == current.name) {
        out.push_str(&format!(
            "\nNow: {} — {} (set by this chat's configuration).",
            current.name,
            current.description()
        ));
    }
    out.push_str("\nSwitch with /agent NAME; /agent default goes back to the default agent.");
    out
}
