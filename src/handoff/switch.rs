//! The carry-over of `/agent NAME`: the builder writes a capsule of the session the switch
//! leaves, tagged with the new agent, before the command answers (the lanes call it through
//! [`crate::lanes::CarryOver`], as they sit below this layer).

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::builder::{BuildJob, Builder, Trigger};
use crate::domain::{MessageEvent, SessionId};
use crate::lanes::CarryOver;
use crate::store::StoreError;

#[async_trait]
impl CarryOver for Builder {
    async fn carry_over(
        &self,
        ev: &MessageEvent,
        session: &SessionId,
        agent: &str,
    ) -> Result<bool, StoreError> {
        let job = BuildJob {
            trigger: Trigger::Switch,
            agent: Some(agent.to_string()),
            ..BuildJob::for_event(ev, session, self.payer_of(ev))
        };
        // Inline in the lane's command, bounded by the writer's own timeouts: nothing is
        // spawned, so nothing outlives the worker.
        let report = Builder::carry_over(self, &job, &CancellationToken::new()).await?;
        Ok(report.is_some_and(|r| r.status.wrote_capsule()))
    }
}
