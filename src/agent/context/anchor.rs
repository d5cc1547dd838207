//! The usage anchor a turn's commit writes: the billed prompt of the turn's last request,
//! pinned to the message it ended on, so the next turn's projection starts from what the
//! provider counted. Owned and pure, so it runs inside whichever transaction lands the commit.

use crate::agent::compaction::estimate_tokens;
use crate::domain::{Role, SessionId};
use crate::store::{ContextRow, NewMessage};

use super::{breaker, fingerprint, spill, PENDING};

/// What the anchor is computed with ([`super::ContextEngine::anchoring`]).
#[derive(Debug, Clone, Copy)]
pub struct Anchoring {
    pub threshold_tokens: u64,
    pub spill_chars: usize,
}

impl Anchoring {
    /// The state [`ContextEngine::after_turn`](super::ContextEngine::after_turn) stores, computed from the state before the
    /// commit (`row`); `None` when nothing changes. Pure, so a lane worker runs it inside its
    /// turn's commit, where the committed message ids become known.
    pub fn anchor_after(
        self,
        mut row: ContextRow,
        session_id: &SessionId,
        messages: &[NewMessage],
        ids: &[i64],
        readings: &[u64],
    ) -> Option<ContextRow> {
        let (&first, &last) = (readings.first()?, readings.last()?);
        // The boundary is the last message of the last request: the one before the answer.
        let b = messages.len().checked_sub(2).filter(|b| *b < ids.len())?;
        if first == 0 || last == 0 {
            return None;
        }
        if row.anchor_fingerprint.as_deref() == Some(PENDING) {
            let threshold = self.threshold_tokens;
            let effective = breaker::judge(&mut row, first, threshold);
            metrics::counter!("herald_compactions_judged_total",
                "effective" => if effective { "yes" } else { "no" })
            .increment(1);
            tracing::info!(session = %session_id, billed = first, threshold, effective,
                strikes = row.compaction_strikes, "compaction judged by the billed prompt");
        }
        // The turn's requests carried its large tool results as previews naming turn-local
        // handles; later requests carry previews naming the stored ids. Replay the turn's
        // spill to price the difference into the anchor.
        let mut this_turn = spill::TurnSpill::new(session_id, self.spill_chars);
        let mut adjust = 0i64;
        let mut boundary_wire = None;
        for (i, m) in messages.iter().enumerate().take(b + 1) {
            let wire = m.api_content.as_deref().unwrap_or(&m.content);
            let spilled = spill::spilled_wire(session_id, ids[i], m.role, wire, self.spill_chars);
            let later = spilled.as_deref().unwrap_or(wire);
            if m.role == Role::Tool {
                let sent = this_turn.wire(m.tool_name.as_deref(), wire);
                adjust += estimate_tokens(later) as i64 - estimate_tokens(&sent) as i64;
            }
            if i == b {
                boundary_wire = Some(later.to_string());
            }
        }
        let m = &messages[b];
        row.prompt_tokens_anchor = Some((last as i64).saturating_add(adjust).max(0));
        row.anchor_fingerprint = Some(fingerprint(
            ids[b],
            m.role,
            boundary_wire.as_deref().unwrap_or_default(),
            m.tool_call_id.as_deref(),
            &m.tool_calls,
        ));
        Some(row)
    }
}
