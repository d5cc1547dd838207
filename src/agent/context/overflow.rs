//! Recovery from a provider-confirmed context overflow: compact the session now, whatever the
//! estimate and the breaker say, so the caller can retry the turn once.
//!
//! The estimate said the prompt fits and the provider said it does not; the provider's answer
//! is the better evidence, so the threshold and the breaker (which guard against compacting on
//! an inflated estimate) are not asked. The compaction is judged by the next billed reading
//! like any other. The caller retries at most once and then tells the person plainly.

use super::{ContextEngine, Known, Prepared, PENDING};
use crate::store::{Lease, Session, StoreResult};

impl ContextEngine<'_> {
    /// Compacts `session` now. `None` when there is nothing between head and tail to compact
    /// (a retry could not help) or the compaction could not be written.
    pub async fn compact_now(
        &self,
        lease: &Lease,
        session: &Session,
        known: Option<Known>,
    ) -> StoreResult<Option<Prepared>> {
        let Known { live: raw, row } = self.known_or_read(session, known).await?;
        // A smaller tail than usual: the last attempt did not fit at all.
        let tail = (self.tail_tokens / 2).max(256);
        let Some(p) = super::plan::plan(&raw, self.window, tail) else {
            tracing::warn!(session = %session.id, "context overflow and nothing left to compact");
            metrics::counter!("herald_compactions_total", "result" => "overflow_empty")
                .increment(1);
            return Ok(None);
        };
        let mut next = row.clone();
        next.prompt_tokens_anchor = None;
        next.anchor_fingerprint = Some(PENDING.into());
        self.notify(&session.id, &raw, &p.middle_ids);
        match self
            .store
            .compact_with_state(lease, &session.id, &p.flip, &p.insert, &next)
            .await
        {
            Ok(_) => {
                metrics::counter!("herald_compactions_total", "result" => "overflow").increment(1);
                tracing::info!(session = %session.id, middle = p.middle_ids.len(),
                    tail = p.tail_len, "compacted after a context overflow");
                let raw = self.store.messages(&session.id, true).await?;
                Ok(Some(Prepared {
                    view: self.view(raw.clone()),
                    known: Known {
                        live: raw,
                        row: next,
                    },
                }))
            }
            Err(e @ crate::store::StoreError::LeaseLost { .. }) => Err(e),
            Err(e) => {
                tracing::warn!(session = %session.id, error = %e, "overflow compaction not written");
                Ok(None)
            }
        }
    }
}
