//! What a compaction of a live transcript would write: the rows to flip and the rows to
//! insert. Pure, so the daemon and `herald sessions compact --dry-run` print and apply the same
//! plan. It must not write or decide when to compact.
//!
//! The carrier row keeps a one-line label in `content` and the projection in `api_content`
//! (what the model is sent). Search indexes `content` only, so discovery lands on the original
//! messages the projection quotes, not on the quote; `[#N]` cites those originals.

use crate::agent::compaction::{
    carrier, project, projection_budget_chars, select_middle, ProjMessage,
};
use crate::domain::Role;
use crate::store::{NewMessage, StoredMessage};

use crate::agent::compaction::CARRIER_HEADER;

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The bare projection (without the carrier wrapping).
    pub projection: String,
    /// Ids of the compacted middle, oldest first.
    pub middle_ids: Vec<i64>,
    /// Middle and kept-tail originals: flipped to (active 0, compacted 1).
    pub flip: Vec<i64>,
    /// The carrier, then copies of the kept tail.
    pub insert: Vec<NewMessage>,
    pub head_len: usize,
    pub tail_len: usize,
}

/// Whether a stored row is a compaction carrier.
pub fn is_carrier(m: &StoredMessage) -> bool {
    m.role != Role::Tool && m.wire_content().starts_with(CARRIER_HEADER)
}

/// The carrier's `content`: a one-line label naming the compacted middle's first and last id.
/// [`carrier_span`] reads it back.
pub fn carrier_label(count: usize, first: i64, last: i64) -> String {
    format!(
        "[compaction] {count} earlier messages (#{first} to #{last}) were replaced in context by \
         a projection that cites them by id"
    )
}

/// The (first, last) ids of the middle a carrier replaced, read from its label. Rows of the
/// session after `last` and before the carrier that were flipped in the same compaction are
/// the originals of the tail copies inserted after the carrier.
pub fn carrier_span(m: &StoredMessage) -> Option<(i64, i64)> {
    if !is_carrier(m) {
        return None;
    }
    let rest = m.content.split_once("(#")?.1;
    let (first, rest) = rest.split_once(" to #")?;
    let last = rest.split_once(')')?.0;
    Some((first.parse().ok()?, last.parse().ok()?))
}

/// The projector's view of a row: what the user or tool said (`content`), except a carrier,
/// whose projection lives in `api_content`.
pub fn to_proj(m: &StoredMessage) -> ProjMessage {
    ProjMessage {
        id: m.id,
        role: m.role,
        content: if is_carrier(m) {
            m.wire_content().to_string()
        } else {
            m.content.clone()
        },
        tool_calls: m.tool_calls.clone(),
        tool_call_id: m.tool_call_id.clone(),
        tool_name: m.tool_name.clone(),
    }
}

/// Plans a compaction of `live` (a session's live rows, oldest first), or `None` when there is
/// no middle to compact.
pub fn plan(live: &[StoredMessage], window_tokens: usize, tail_tokens: usize) -> Option<Plan> {
    let proj: Vec<ProjMessage> = live.iter().map(to_proj).collect();
    let split = select_middle(&proj, window_tokens, tail_tokens);
    // The projector cannot tell a person's request from a synthetic user row (a mirrored
    // brief): the latest request a person wrote is pulled into the tail here.
    let mut tail_start = match live.iter().rposition(StoredMessage::is_person_request) {
        Some(u) => split.tail.start.min(u).max(split.head.end),
        None => split.tail.start,
    };
    // An earlier carrier left in the tail is merged into the new one rather than kept beside it.
    if let Some(c) = live[tail_start..].iter().rposition(is_carrier) {
        tail_start += c + 1;
        while tail_start < live.len() && live[tail_start].role == Role::Tool {
            tail_start += 1;
        }
    }
    let middle = split.middle.start..tail_start;
    if middle.is_empty() {
        return None;
    }
    let projection = project(
        &proj[middle.clone()],
        None,
        projection_budget_chars(window_tokens),
    );
    let middle_ids: Vec<i64> = live[middle.clone()].iter().map(|m| m.id).collect();
    let label = carrier_label(
        middle_ids.len(),
        middle_ids[0],
        middle_ids[middle_ids.len() - 1],
    );
    let mut c = NewMessage::new(Role::User, label);
    c.api_content = Some(carrier(&projection));
    let mut insert = vec![c];
    insert.extend(live[tail_start..].iter().map(|m| NewMessage {
        role: m.role,
        content: m.content.clone(),
        api_content: m.api_content.clone(),
        tool_calls: m.tool_calls.clone(),
        tool_call_id: m.tool_call_id.clone(),
        tool_name: m.tool_name.clone(),
        // A copy of a person's request is still that request (the first turn, the latest
        // request and the tail rule all look for it).
        platform_message_id: m.platform_message_id.clone(),
        media: m.media.clone(),
    }));
    Some(Plan {
        projection,
        flip: live[middle.start..].iter().map(|m| m.id).collect(),
        middle_ids,
        insert,
        head_len: split.head.len(),
        tail_len: live.len() - tail_start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, role: Role, text: &str, person: bool) -> StoredMessage {
        StoredMessage {
            id,
            session_id: "s".into(),
            role,
            content: text.into(),
            api_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            active: true,
            compacted: false,
            platform_message_id: person.then(|| format!("m{id}")),
            media: Vec::new(),
            created_at: 0,
        }
    }

    #[test]
    fn the_latest_request_a_person_wrote_stays_in_the_tail_behind_a_mirrored_brief() {
        let long = "the build log says the same thing again. ".repeat(40);
        let mut live = vec![
            row(1, Role::User, "goal: make the build green", true),
            row(2, Role::Assistant, "on it", false),
        ];
        for i in 0..6 {
            live.push(row(3 + 2 * i, Role::User, &long, true));
            live.push(row(4 + 2 * i, Role::Assistant, &long, false));
        }
        live.push(row(15, Role::User, "do not change the config yet", true));
        live.push(row(16, Role::Assistant, &long, false));
        // A brief mirrored after it: a synthetic user row and the brief.
        live.push(row(17, Role::User, "[scheduled delivery: morning]", false));
        live.push(row(18, Role::Assistant, &long, false));
        let p = plan(&live, 4_000, 50).expect("a middle to compact");
        assert!(
            p.insert
                .iter()
                .any(|m| m.content == "do not change the config yet"
                    && m.platform_message_id.as_deref() == Some("m15")),
            "the person's request is kept verbatim, still marked as theirs"
        );
        assert!(!p.flip.is_empty() && p.middle_ids.iter().all(|id| *id < 15));
        let c = &p.insert[0];
        let stored = StoredMessage::committed(19, &"s".into(), c, 0);
        assert_eq!(
            carrier_span(&stored),
            Some((p.middle_ids[0], *p.middle_ids.last().unwrap()))
        );
    }
}
