//! The store's clock: the one source of "now" for every time the store stamps on a row or
//! compares against (lease and claim expiry, due times, created/updated stamps).
//!
//! A running daemon uses [`SystemClock`], the wall clock in epoch milliseconds. The store
//! contract tests open their store with a [`ManualClock`] and move it forward, so proving that
//! a lease or a claim expires takes no real waiting.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

pub trait Clock: Send + Sync + 'static {
    /// Now, in epoch milliseconds.
    fn now_ms(&self) -> i64;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        super::now_ms()
    }
}

/// A clock that stands still until it is moved: starts at the wall clock's now.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new() -> ManualClock {
        ManualClock(AtomicI64::new(super::now_ms()))
    }

    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
