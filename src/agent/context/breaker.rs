//! The compaction breaker: pure rules over the state stored on the session row, so a restart
//! reads back exactly where it was.
//!
//! Two ineffective passes in a row trip it. While tripped, a wanted compaction is blocked; the
//! first blocked check arms a timer, and after [`PROBATION_AFTER_MS`] of continuous block one
//! probation pass is allowed. A check that no longer wants to compact ends the block (it was
//! not continuous). This module must not read a clock or the store: the caller passes `now`.

use crate::store::ContextRow;

/// Consecutive ineffective compactions that trip the breaker.
pub const TRIP_STRIKES: i64 = 2;
/// Continuous block before one probation pass.
pub const PROBATION_AFTER_MS: i64 = 5 * 60 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Under the threshold: nothing to do.
    NotNeeded,
    Allow,
    /// Tripped, but blocked long enough: one attempt.
    Probation,
    Blocked,
}

/// Decides whether a compaction may run now and returns the state to store with the decision.
pub fn gate(row: &ContextRow, wants: bool, now_ms: i64) -> (Gate, ContextRow) {
    let mut next = row.clone();
    if !wants {
        next.breaker_blocked_since = None;
        return (Gate::NotNeeded, next);
    }
    if row.compaction_strikes < TRIP_STRIKES {
        next.breaker_blocked_since = None;
        return (Gate::Allow, next);
    }
    match row.breaker_blocked_since {
        None => {
            next.breaker_blocked_since = Some(now_ms);
            (Gate::Blocked, next)
        }
        // A clock that went backwards only lengthens the block.
        Some(since) if now_ms.saturating_sub(since) >= PROBATION_AFTER_MS => {
            next.breaker_blocked_since = None;
            (Gate::Probation, next)
        }
        Some(_) => (Gate::Blocked, next),
    }
}

/// Judges a compaction by the first billed reading after it: under the threshold resets the
/// strikes, anything else counts one.
pub fn judge(row: &mut ContextRow, billed_prompt: u64, threshold_tokens: u64) -> bool {
    let effective = billed_prompt < threshold_tokens;
    if effective {
        row.compaction_strikes = 0;
        row.breaker_blocked_since = None;
    } else {
        row.compaction_strikes += 1;
    }
    effective
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(strikes: i64, since: Option<i64>) -> ContextRow {
        ContextRow {
            compaction_strikes: strikes,
            breaker_blocked_since: since,
            ..ContextRow::default()
        }
    }

    #[test]
    fn gate_rules() {
        let m5 = PROBATION_AFTER_MS;
        // (strikes, blocked since, wants, now) → (gate, stored blocked since)
        let table = [
            (0, None, false, 10, Gate::NotNeeded, None),
            (2, Some(5), false, 10, Gate::NotNeeded, None),
            (0, None, true, 10, Gate::Allow, None),
            (1, None, true, 10, Gate::Allow, None),
            (2, None, true, 10, Gate::Blocked, Some(10)),
            (2, Some(10), true, 10 + m5 - 1, Gate::Blocked, Some(10)),
            (2, Some(10), true, 10 + m5, Gate::Probation, None),
            (3, Some(10), true, 10 + m5 + 99, Gate::Probation, None),
            (2, Some(10), true, 5, Gate::Blocked, Some(10)),
        ];
        for (strikes, since, wants, now, want_gate, want_since) in table {
            let (g, next) = gate(&row(strikes, since), wants, now);
            assert_eq!(
                g, want_gate,
                "strikes {strikes} since {since:?} wants {wants} now {now}"
            );
            assert_eq!(next.breaker_blocked_since, want_since);
            assert_eq!(next.compaction_strikes, strikes);
        }
    }

    #[test]
    fn two_ineffective_passes_trip_and_one_effective_pass_resets() {
        let mut r = row(0, None);
        assert!(!judge(&mut r, 900, 750));
        assert_eq!(gate(&r, true, 0).0, Gate::Allow);
        assert!(!judge(&mut r, 800, 750));
        assert_eq!(gate(&r, true, 0).0, Gate::Blocked);
        assert!(judge(&mut r, 700, 750));
        assert_eq!(r, row(0, None));
    }
}
