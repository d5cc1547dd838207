//! A lane worker's lease heartbeat: the lease is renewed while the worker serves, and its loss
//! is told to the worker before its next write (every write is fenced by the lease anyway).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::store::{Lease, StoreError};

/// Renews the lease; on loss, cancels `lost` so the worker stops before its next write.
pub(super) async fn heartbeat(
    deps: Arc<super::Deps>,
    lease: Lease,
    lost: CancellationToken,
    abort: CancellationToken,
) {
    let every = Duration::from_secs(deps.config.lanes.heartbeat_secs);
    let ttl = Duration::from_secs(deps.config.lanes.lease_ttl_secs);
    loop {
        if crate::tasks::sleep_or_cancel(every, &abort).await.is_err() {
            return;
        }
        match deps.store.lease_renew(&lease, ttl).await {
            Ok(()) => {}
            Err(StoreError::LeaseLost { .. }) => {
                lost.cancel();
                return;
            }
            Err(e) => tracing::warn!(error = %e, "lease renewal failed; retrying"),
        }
    }
}
