//! Ties a helper task (a lease heartbeat, a typing indicator) to the code that owns it: the
//! task is aborted when its guard is dropped, on every path out of the owner — a return, an
//! early `?`, a cancelled future, or a panic unwinding through it.
//!
//! Without this, a turn that panicked left its lease heartbeat running forever and the lane
//! pinned to a dead worker. Must not: be detached (`std::mem::forget`) or outlive its owner.

use tokio::task::JoinHandle;

pub(super) struct AbortOnDrop(JoinHandle<()>);

impl AbortOnDrop {
    pub(super) fn spawn<F>(task: F) -> AbortOnDrop
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        AbortOnDrop(tokio::spawn(task))
    }
}

impl AbortOnDrop {
    /// Gives the task up to `within` to end by itself (it was told to stop); it is aborted
    /// when the guard drops either way.
    pub(super) async fn join(&mut self, within: std::time::Duration) {
        let _ = tokio::time::timeout(within, &mut self.0).await;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn a_panicking_owner_stops_its_task() {
        let alive = Arc::new(AtomicBool::new(false));
        let seen = alive.clone();
        let owner = tokio::spawn(async move {
            let _guard = AbortOnDrop::spawn(async move {
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
}
