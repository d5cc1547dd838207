//! Delivery: the first turn of a new session in a lane receives the lane's pending capsule,
//! once, appended to its user message behind the label.
//!
//! The marker is consumed atomically in the store, so two replicas (or two sessions) cannot
//! both receive it, and the session the capsule summarizes never receives its own capsule. The
//! capsule is scoped by agent: a session of agent B never receives a capsule made with agent A
//! (it stays pending for A's next session in the lane). The
//! capsule goes into the user message, never the system prompt: the prompt bytes stay the same
//! and the provider's prompt cache keeps hitting.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{injection_text, PENDING_MAX_AGE_HOURS};
use crate::hooks::{PreLlmContext, PreLlmHook};
use crate::store::Store;

pub struct HandoffInject {
    store: Arc<dyn Store>,
    inject: bool,
}

impl HandoffInject {
    pub fn new(store: Arc<dyn Store>, inject: bool) -> HandoffInject {
        HandoffInject { store, inject }
    }
}

#[async_trait]
impl PreLlmHook for HandoffInject {
    fn name(&self) -> &'static str {
        "handoff"
    }

    async fn context(&self, ctx: &PreLlmContext<'_>) -> Option<String> {
        if !self.inject || !ctx.first_turn || ctx.lane.is_cron() {
            return None;
        }
        let max_age = Duration::from_secs(PENDING_MAX_AGE_HOURS as u64 * 3600);
        let take = match self
            .store
            .pending_consume_for(
                ctx.lane,
                ctx.agent,
                ctx.session_id,
                max_age,
                crate::store::now_ms(),
            )
            .await
        {
            Ok(t) => t,
            Err(e) => {
                // The turn goes on without the capsule; the marker stays for the next session.
                tracing::warn!(lane = %ctx.lane, error = %e, "could not read the pending capsule");
                return None;
            }
        };
        if take.expired > 0 {
            tracing::info!(lane = %ctx.lane, "a pending capsule older than {PENDING_MAX_AGE_HOURS} h was deleted unread");
        }
        let capsule = take.capsule?;
        tracing::info!(lane = %ctx.lane, session = %ctx.session_id, capsule = capsule.id, status = %capsule.status, "handoff capsule handed to a new session");
        Some(injection_text(&capsule.text))
    }
}
