//! The replica lease (`replica:<id>`): proof that this process is alive, renewed every few
//! second. Outbox claims of a replica whose lease expired are taken over at once, so a crash
//! delays its claimed replies by the lease TTL rather than the whole claim TTL, and the live
//! replicas (which share the Discord shards) are known within seconds of a death.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::store::Store;

const TTL: Duration = crate::store::ROLE_LEASE_TTL;
const RENEW_EVERY: Duration = crate::store::ROLE_RENEW_EVERY;

/// Takes the replica lease and keeps it renewed until `cancel`, then releases it.
pub async fn start(
    store: Arc<dyn Store>,
    replica_id: &str,
    tracker: &TaskTracker,
    cancel: CancellationToken,
) {
    let name = format!("replica:{replica_id}");
    let lease = match store.lease_acquire(&name, replica_id, TTL).await {
        Ok(Some(l)) => l,
        Ok(None) => {
            tracing::warn!(replica = %replica_id, "another live process uses this replica id; its outbox claims may be taken over");
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot take the replica lease; claims fall back to their TTL");
            return;
        }
    };
    tracker.spawn(async move {
        loop {
            if crate::tasks::sleep_or_cancel(RENEW_EVERY, &cancel)
                .await
                .is_err()
            {
                break;
            }
            if let Err(e) = store.lease_renew(&lease, TTL).await {
                tracing::warn!(error = %e, "replica lease renewal failed");
            }
        }
        let _ = store.lease_release(&lease).await;
    });
}
