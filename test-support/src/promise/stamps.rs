//! When a platform fake accepted each send, on the kills' clock: the fakes record a monotonic
//! `Instant`, the census's kills an epoch-ms, and [`Receipts`] places each resend against the
//! kills, so one clock taken when the channel starts turns the one into the other.

use std::time::Instant;

use super::census::Kill;
use super::receipts::Receipts;

/// The instant and epoch-ms of one moment, taken together.
#[derive(Clone, Copy)]
pub struct Clock {
    at: Instant,
    ms: i64,
}

impl Clock {
    pub fn now() -> Clock {
        Clock {
            at: Instant::now(),
            ms: chrono::Utc::now().timestamp_millis(),
        }
    }

    /// `t` in epoch-ms.
    pub fn ms(&self, t: Instant) -> i64 {
        self.ms + t.saturating_duration_since(self.at).as_millis() as i64
    }

    /// Counts the fake's `sent` records (each with the instant it was recorded; `quotes` says
    /// which pushed message a record answers, if any) against `pushed` and the `kills`.
    pub fn receipts<M, K>(
        &self,
        pushed: &[K],
        sent: Vec<(M, Instant)>,
        quotes: impl Fn(&M) -> Option<K>,
        kills: &[Kill],
    ) -> Receipts
    where
        K: Eq + std::hash::Hash + Copy + std::fmt::Debug,
    {
        let sends: Vec<(Option<K>, i64)> =
            sent.iter().map(|(m, t)| (quotes(m), self.ms(*t))).collect();
        Receipts::count(pushed, &sends, kills)
    }
}
