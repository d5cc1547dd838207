//! The one way a long-running loop waits: sleep unless its cancellation token fires.
//!
//! Every background loop (pollers, leases, watchdogs, retries with backoff) pauses through
//! [`sleep_or_cancel`], so shutdown reaches all of them the same way and no loop can sleep
//! through it. Tasks are spawned on the app's `TaskTracker`, never loose (the tidy test checks).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Sleeps for `wait`; returns `false` as soon as `cancel` fires (the caller stops), `true`
/// when the time is up.
pub async fn sleep_or_cancel(wait: Duration, cancel: &CancellationToken) -> bool {
    cancel
        .run_until_cancelled(tokio::time::sleep(wait))
        .await
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeps_or_stops() {
        let cancel = CancellationToken::new();
        assert!(sleep_or_cancel(Duration::from_millis(5), &cancel).await);
        let c = cancel.clone();
        let waiting =
            tokio::spawn(async move { sleep_or_cancel(Duration::from_secs(3600), &c).await });
        tokio::task::yield_now().await;
        cancel.cancel();
        assert!(!waiting.await.unwrap());
        assert!(
            !sleep_or_cancel(Duration::ZERO, &cancel).await,
            "already cancelled"
        );
    }
}
