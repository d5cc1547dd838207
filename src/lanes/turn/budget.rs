//! The turn's budget: whose spending its model calls are (the person, across their linked
//! identities; or the cron job and its run with the job's own cap), so the meter can reserve
//! under the caps that apply and the turn's row can carry what it spent.

use crate::budget::{Payer, TurnMeter};
use crate::domain::{MessageEvent, Origin};
use crate::lanes::worker::Worker;

impl Worker {
    /// The meter of a turn answering `ev`.
    pub(super) async fn meter(&self, ev: &MessageEvent) -> TurnMeter {
        let deps = &self.router.deps;
        let mut payer = Payer {
            lane: self.lane.to_string(),
            person: deps.config.person(ev.platform.as_str(), &ev.sender_id),
            cause: "turn",
            ..Payer::default()
        };
        if let Origin::Scheduled { .. } = ev.origin {
            let job = ev.chat_id.clone();
            payer.job_cap = match deps.store.cron_job_get(&job).await {
                Ok(row) => row.and_then(|r| r.spec.budget).map(|a| a.units()),
                Err(e) => {
                    tracing::warn!(job = %job, error = %e, "reading the job's budget failed; the default cap applies");
                    None
                }
            };
            payer.run = Some(ev.platform_message_id.clone());
            payer.job = Some(job);
        }
        deps.budget.meter(payer)
    }
}
