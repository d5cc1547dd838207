//! The turn's budget: whose spending its model calls are (the person, across their linked
//! identities; for a cron run, the person who made the job in a chat or else the system, with
//! the job's run and its own cap), so the meter can reserve under the caps that apply and the
//! turn's row can carry what it spent. The turn's agent is charged too: its own caps are read
//! from the roster the turn resolved, so a reload changes them for the next turn.

use crate::agent::roster::Agent;
use crate::budget::{Charge, TurnMeter};
use crate::config::AgentBudget;
use crate::domain::{MessageEvent, Origin, Payer};
use crate::lanes::worker::Worker;

impl Worker {
    /// The meter of a turn answering `ev` as `agent`, under the prices and caps of the turn's
    /// agent (read with it at the turn's start: a reload changes the next turn's).
    pub(super) async fn meter(&self, ev: &MessageEvent, agent: &Agent) -> TurnMeter {
        let deps = &self.router.deps;
        let budget = &agent.budget;
        let mut charge = Charge::new(
            self.lane.to_string(),
            budget.payer_of(ev.platform.as_str(), &ev.sender_id),
            "turn",
        )
        .by_agent(&agent.name, agent_caps(agent));
        if let Origin::Scheduled { .. } = ev.origin {
            let job = ev.chat_id.clone();
            match deps.store.cron_job_get(&job).await {
                Ok(Some(row)) => {
                    charge.payer = budget.job_payer(&row);
                    charge.job_cap = row.spec.budget.map(|a| a.units());
                }
                // A webhook's run: its hook's own cap, paid by the system.
                Ok(None) if job.starts_with("hook:") => {
                    charge.payer = Payer::System;
                    charge.job_cap = deps
                        .config
                        .hooks
                        .iter()
                        .find(|h| h.job() == job)
                        .and_then(|h| h.budget)
                        .map(|a| a.units());
                }
                Ok(None) => {
                    tracing::warn!(job = %job, "the job of this run is gone; the system pays for it");
                    charge.payer = Payer::System;
                }
                Err(e) => {
                    tracing::warn!(job = %job, error = %e, "reading the job failed; the system pays for the run under the default cap");
                    charge.payer = Payer::System;
                }
            }
            charge.run = Some(ev.platform_message_id.clone());
            charge.job = Some(job);
        }
        budget.meter(charge)
    }
}

/// `agent`'s own caps (`[[agents]] budget`) as its live config has them.
pub(crate) fn agent_caps(agent: &Agent) -> AgentBudget {
    agent
        .config
        .agent_spec(&agent.name)
        .map(|s| s.budget.clone())
        .unwrap_or_default()
}
