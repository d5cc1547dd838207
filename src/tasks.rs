//! The one way a long-running loop waits: sleep unless its cancellation token fires.
//!
//! Every background loop (pollers, leases, watchdogs, retries with backoff) pauses through
//! [`sleep_or_cancel`] or a [`Backoff`], so shutdown reaches all of them the same way and no
//! loop can sleep through it. A wait that was cut short is `Err(Cancelled)`, so a loop stops
//! with `?` or `.is_err()`. Tasks are spawned on the app's `TaskTracker`, never loose (the
//! tidy test checks), except a helper task tied to its owner by [`spawn_owned`].

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// Spawns a helper task (a lease heartbeat, a typing indicator, a preview) that dies with the
/// code owning the returned handle: it is aborted on every path out of the owner — a return,
/// an early `?`, a cancelled future, or a panic unwinding through it. Without this, a turn
/// that panicked left its lease heartbeat running and the lane pinned to a dead worker.
pub fn spawn_owned<F>(task: F) -> AbortOnDropHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    AbortOnDropHandle::new(tokio::spawn(task))
}

/// The wait ended because the task was told to stop, not because the time was up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

/// Sleeps for `wait`; `Err(Cancelled)` as soon as `cancel` fires (the caller stops).
pub async fn sleep_or_cancel(wait: Duration, cancel: &CancellationToken) -> Result<(), Cancelled> {
    cancel
        .run_until_cancelled(tokio::time::sleep(wait))
        .await
        .ok_or(Cancelled)
}

/// Doubling waits for a loop that retries until it succeeds or is cancelled: `min`, `2·min`,
/// … capped at `max`, never giving up (backon's exponential schedule, without jitter).
#[derive(Debug)]
pub struct Backoff {
    schedule: ExponentialBuilder,
    delays: <ExponentialBuilder as BackoffBuilder>::Backoff,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Backoff {
        let schedule = ExponentialBuilder::new()
            .with_min_delay(min)
            .with_max_delay(max)
            .with_factor(2.0)
            .without_max_times();
        Backoff {
            schedule,
            delays: schedule.build(),
        }
    }

    /// The next wait in the schedule (for a caller that logs it or sleeps on its own terms).
    pub fn next_delay(&mut self) -> Duration {
        self.delays
            .next()
            .expect("a schedule without a retry limit never ends")
    }

    /// Back to `min`, after a success.
    pub fn reset(&mut self) {
        self.delays = self.schedule.build();
    }

    /// Sleeps the next wait in the schedule unless `cancel` fires first.
    pub async fn wait(&mut self, cancel: &CancellationToken) -> Result<(), Cancelled> {
        sleep_or_cancel(self.next_delay(), cancel).await
    }

    /// Sleeps the next wait even through shutdown. Only for a short retry with a fixed number
    /// of attempts whose giving up early would lose a person's data (a sent message not
    /// marked sent, a Discord message Discord will not redeliver).
    pub async fn pause(&mut self) {
        tokio::time::sleep(self.next_delay()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeps_or_stops() {
        let cancel = CancellationToken::new();
        assert_eq!(
            sleep_or_cancel(Duration::from_millis(5), &cancel).await,
            Ok(())
        );
        let c = cancel.clone();
        let waiting =
            tokio::spawn(async move { sleep_or_cancel(Duration::from_secs(3600), &c).await });
        tokio::task::yield_now().await;
        cancel.cancel();
        assert_eq!(waiting.await.unwrap(), Err(Cancelled));
        assert_eq!(
            sleep_or_cancel(Duration::ZERO, &cancel).await,
            Err(Cancelled),
            "already cancelled"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_owner_stops_its_task() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let alive = Arc::new(AtomicBool::new(false));
        let seen = alive.clone();
        let owner = tokio::spawn(async move {
            let _task = spawn_owned(async move {
                loop {
                    seen.store(true, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            panic!("owner panics");
        });
        assert!(owner.await.unwrap_err().is_panic());
        alive.store(false, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!alive.load(Ordering::SeqCst), "the task outlived its owner");
    }

    #[test]
    fn backoff_doubles_up_to_its_cap_and_starts_over_after_a_reset() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(200), ms(1000));
        let waits: Vec<u128> = (0..5).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(waits, [200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_delay().as_millis(), 200);
    }
}
