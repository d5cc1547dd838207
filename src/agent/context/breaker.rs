//! The compaction breaker: pure rules over the state stored on the session row, so a restart
//! reads back exactly where it was.
//!
//! Two ineffective passes in a row trip it. While tripped, a wanted compaction is blocked; the
//! first blocked check arms it, and after [`PROBATION_AFTER_MS`] of continuous block one
//! probation pass is allowed. A check that no longer wants to compact ends the block (it was
//! not continuous).
//!
//! The block is measured with the monotonic clock, never the wall clock: an NTP step or a
//! hand-set date must not end a block early. Monotonic readings of different processes cannot
//! be subtracted, so the row keeps the block accumulated so far plus the last reading and the
//! process that took it; each check adds the time since that reading when it is its own
//! process's, and nothing when another process (a restart, another replica) took it. A restart
//! therefore keeps what was accumulated and only the downtime goes uncounted. One step counts
//! at most [`MAX_STEP_MS`]: a monotonic clock that jumps (a VM resumed by its hypervisor) then
//! counts no more than a chat idle for that long would, which is allowed anyway.
//!
//! This module must not read a clock or the store: the caller passes the reading.

use crate::store::ContextRow;

/// Consecutive ineffective compactions that trip the breaker.
pub const TRIP_STRIKES: i64 = 2;
/// Continuous block before one probation pass.
pub const PROBATION_AFTER_MS: i64 = 5 * 60 * 1000;
/// The most one step between two checks adds to the block.
pub const MAX_STEP_MS: i64 = PROBATION_AFTER_MS;

/// A reading of one process's monotonic clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tick {
    /// Identifies the process whose clock this is (a value no other process uses).
    pub process: String,
    /// Milliseconds since a point fixed for that process.
    pub ms: i64,
}

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
pub fn gate(row: &ContextRow, wants: bool, now: &Tick) -> (Gate, ContextRow) {
    let mut next = row.clone();
    if !wants {
        unblock(&mut next);
        return (Gate::NotNeeded, next);
    }
    if row.compaction_strikes < TRIP_STRIKES {
        unblock(&mut next);
        return (Gate::Allow, next);
    }
    let blocked = match row.breaker_blocked_ms {
        // The first blocked check arms the block at zero.
        None => 0,
        Some(so_far) => so_far.max(0).saturating_add(step(row, now)),
    };
    if blocked >= PROBATION_AFTER_MS {
        unblock(&mut next);
        return (Gate::Probation, next);
    }
    next.breaker_blocked_ms = Some(blocked);
    next.breaker_clock = Some(now.process.clone());
    next.breaker_clock_ms = Some(now.ms);
    (Gate::Blocked, next)
}

/// Block time since the row's last reading: zero when another process took it.
fn step(row: &ContextRow, now: &Tick) -> i64 {
    match (&row.breaker_clock, row.breaker_clock_ms) {
        (Some(p), Some(then)) if *p == now.process => {
            now.ms.saturating_sub(then).clamp(0, MAX_STEP_MS)
        }
        _ => 0,
    }
}

fn unblock(row: &mut ContextRow) {
    row.breaker_blocked_ms = None;
    row.breaker_clock = None;
    row.breaker_clock_ms = None;
}

/// Judges a compaction by the first billed reading after it: under the threshold resets the
/// strikes, anything else counts one.
pub fn judge(row: &mut ContextRow, billed_prompt: u64, threshold_tokens: u64) -> bool {
    let effective = billed_prompt < threshold_tokens;
    if effective {
        row.compaction_strikes = 0;
        unblock(row);
    } else {
        row.compaction_strikes += 1;
    }
    effective
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (blocked so far, last reading's process, its ms)
    type Block = Option<(i64, &'static str, i64)>;

    fn row(strikes: i64, block: Block) -> ContextRow {
        ContextRow {
            compaction_strikes: strikes,
            breaker_blocked_ms: block.map(|b| b.0),
            breaker_clock: block.map(|b| b.1.to_string()),
            breaker_clock_ms: block.map(|b| b.2),
            ..ContextRow::default()
        }
    }

    fn tick(process: &str, ms: i64) -> Tick {
        Tick {
            process: process.into(),
            ms,
        }
    }

    #[test]
    fn gate_rules() {
        let m5 = PROBATION_AFTER_MS;
        let day = 24 * 60 * m5;
        // (strikes, stored block, wants, now) → (gate, stored block)
        let table: [(i64, Block, bool, Tick, Gate, Block); 13] = [
            (0, None, false, tick("a", 10), Gate::NotNeeded, None),
            (
                2,
                Some((5, "a", 5)),
                false,
                tick("a", 10),
                Gate::NotNeeded,
                None,
            ),
            (0, None, true, tick("a", 10), Gate::Allow, None),
            (1, None, true, tick("a", 10), Gate::Allow, None),
            // Armed at the first blocked check.
            (
                2,
                None,
                true,
                tick("a", 10),
                Gate::Blocked,
                Some((0, "a", 10)),
            ),
            // Same process: the monotonic time between checks accumulates.
            (
                2,
                Some((0, "a", 10)),
                true,
                tick("a", 10 + m5 - 1),
                Gate::Blocked,
                Some((m5 - 1, "a", 10 + m5 - 1)),
            ),
            (
                2,
                Some((0, "a", 10)),
                true,
                tick("a", 10 + m5),
                Gate::Probation,
                None,
            ),
            (
                2,
                Some((m5 - 7, "a", 10)),
                true,
                tick("a", 17),
                Gate::Probation,
                None,
            ),
            (
                3,
                Some((100, "a", 10)),
                true,
                tick("a", 10 + m5),
                Gate::Probation,
                None,
            ),
            // A restart (another process's reading): kept, the downtime not counted.
            (
                2,
                Some((m5 - 1, "a", 10)),
                true,
                tick("b", 99 * m5),
                Gate::Blocked,
                Some((m5 - 1, "b", 99 * m5)),
            ),
            // A monotonic reading below the stored one counts nothing.
            (
                2,
                Some((60, "a", 500)),
                true,
                tick("a", 400),
                Gate::Blocked,
                Some((60, "a", 400)),
            ),
            // A jump of a day counts one step at most: no more than a chat idle five minutes.
            (
                2,
                Some((0, "a", 10)),
                true,
                tick("a", 10 + day),
                Gate::Probation,
                None,
            ),
            (
                2,
                Some((0, "a", 10)),
                true,
                tick("a", 10 + MAX_STEP_MS - 1),
                Gate::Blocked,
                Some((MAX_STEP_MS - 1, "a", 10 + MAX_STEP_MS - 1)),
            ),
        ];
        for (strikes, block, wants, now, want_gate, want_block) in table {
            let (g, next) = gate(&row(strikes, block), wants, &now);
            let case = format!("strikes {strikes} block {block:?} wants {wants} now {now:?}");
            assert_eq!(g, want_gate, "{case}");
            assert_eq!(next, row(strikes, want_block), "{case}");
        }
    }

    /// The wall clock is no input: a block measured in one process's monotonic readings ends
    /// after five minutes of them, whatever the wall clock did in between.
    #[test]
    fn a_wall_clock_step_forward_does_not_end_a_block() {
        let mut r = row(2, None);
        // Checks a minute apart by the monotonic clock; had the wall clock been used, an NTP
        // step of an hour between the first two would have granted probation at once.
        for minute in 0..5 {
            let (g, next) = gate(&r, true, &tick("a", minute * 60_000));
            assert_eq!(g, Gate::Blocked, "minute {minute}");
            r = next;
        }
        assert_eq!(gate(&r, true, &tick("a", 5 * 60_000)).0, Gate::Probation);
    }

    #[test]
    fn two_ineffective_passes_trip_and_one_effective_pass_resets() {
        let mut r = row(0, None);
        let t = tick("a", 0);
        assert!(!judge(&mut r, 900, 750));
        assert_eq!(gate(&r, true, &t).0, Gate::Allow);
        assert!(!judge(&mut r, 800, 750));
        let (g, blocked) = gate(&r, true, &t);
        assert_eq!(g, Gate::Blocked);
        r = blocked;
        assert!(judge(&mut r, 700, 750));
        assert_eq!(r, row(0, None));
    }
}
