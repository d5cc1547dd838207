//! The dialogue a capsule is written from: every user and assistant message of the session,
//! including the ones an in-place compaction took out of the model's context.
//!
//! After a compaction the middle rows are `compacted` and the live carrier holds only a label,
//! so reading live rows alone would hand the writer the head and the tail and lose the middle.
//! Here the session is read whole, in id order, and each message appears once: carriers are
//! dropped, and so are the compacted originals of the tail copies a compaction re-inserted
//! after its carrier (the copy stands for them). Retracted rows are never read.
//!
//! Must not: read the store or decide what fits; the caller caps the input.

use std::collections::HashSet;

use super::TranscriptLine;
use crate::agent::context::plan::{carrier_span, is_carrier};
use crate::domain::Role;
use crate::store::StoredMessage;

/// `rows`: every row of one session, oldest first (`messages(session, false)`).
pub fn session_dialogue(rows: &[StoredMessage]) -> Vec<TranscriptLine> {
    let copied: HashSet<i64> = rows
        .iter()
        .filter_map(|c| carrier_span(c).map(|(_, last)| (last, c.id)))
        .flat_map(|(last, carrier)| {
            rows.iter()
                .filter(move |m| m.compacted && m.id > last && m.id < carrier)
                .map(|m| m.id)
        })
        .collect();
    rows.iter()
        .filter(|m| m.active || m.compacted)
        .filter(|m| !is_carrier(m) && !copied.contains(&m.id))
        .filter(|m| matches!(m.role, Role::User | Role::Assistant) && m.tool_calls.is_empty())
        .map(|m| TranscriptLine {
            id: m.id,
            role: m.role.as_str().to_string(),
            text: m.content.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::compaction::carrier;
    use crate::agent::context::plan::carrier_label;

    fn row(id: i64, role: Role, text: &str, active: bool, compacted: bool) -> StoredMessage {
        StoredMessage {
            id,
            session_id: "s".into(),
            role,
            content: text.into(),
            api_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            active,
            compacted,
            platform_message_id: None,
            media: Vec::new(),
            created_at: 0,
        }
    }

    #[test]
    fn a_compacted_session_reads_whole_and_each_message_once() {
        let (u, a) = (Role::User, Role::Assistant);
        let mut c = row(7, u, &carrier_label(2, 3, 4), true, false);
        c.api_content = Some(carrier("projection"));
        let rows = vec![
            row(1, u, "head q", true, false),
            row(2, a, "head a", true, false),
            row(3, u, "middle q", false, true),
            row(4, a, "middle a", false, true),
            row(5, u, "tail q", false, true), // original of 8
            row(6, a, "tail a", false, true), // original of 9
            c,
            row(8, u, "tail q", true, false),
            row(9, a, "tail a", true, false),
            row(10, u, "retracted", false, false),
            row(11, u, "new q", true, false),
        ];
        let got: Vec<(i64, String)> = session_dialogue(&rows)
            .into_iter()
            .map(|l| (l.id, l.text))
            .collect();
        let want = [
            (1, "head q"),
            (2, "head a"),
            (3, "middle q"),
            (4, "middle a"),
            (8, "tail q"),
            (9, "tail a"),
            (11, "new q"),
        ];
        assert_eq!(
            got,
            want.map(|(i, t)| (i, t.to_string())).to_vec(),
            "carrier, tail originals and retracted rows are left out"
        );
    }
}
