//! The in-loop context check: between the tool iterations of one long turn, shrink the
//! in-flight request when its estimate passes the in-turn threshold.
//!
//! What is kept, always: the system prompt (byte for byte — the cache prefix), the opening
//! request of this turn, and whole tool groups (an assistant message with tool calls and every
//! result answering it stay together, so the provider never sees a call without its result).
//! What gives way, in order: the results of older tool groups of this turn become short stubs
//! (their rows keep the whole result), then the history before the opening request becomes one
//! deterministic projection (`compaction::project`, citing stored ids). Only the request
//! changes: the stored transcript is untouched, and the next turn's between-turns check
//! compacts the stored session the usual way. Pure: no store, no model call.

use crate::agent::compaction::{
    carrier, estimate_tokens, project, projection_budget_chars, ProjMessage,
};
use crate::domain::Role;
use crate::llm::{ChatMessage, Part, ToolSpec};
use crate::store::StoredMessage;

use super::plan::to_proj;

/// When and how far to shrink the in-flight request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InTurnBudget {
    /// Shrink once the estimate passes this many tokens.
    pub budget_tokens: usize,
    /// Newest tool groups kept whole up to this many tokens (the newest one always).
    pub tail_tokens: usize,
    /// The model's window (sizes the projection).
    pub window: usize,
}

/// What one shrink did, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shrunk {
    pub before: usize,
    pub after: usize,
    pub stubbed: usize,
    pub projected: usize,
}

const OVERHEAD: usize = 4;

fn tokens(m: &ChatMessage) -> usize {
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.arguments))
        .sum();
    let parts: usize = m.parts.iter().map(Part::tokens).sum();
    estimate_tokens(m.content.as_deref().unwrap_or_default()) + calls + parts + OVERHEAD
}

/// Estimated tokens of a request: its messages and the tool schemas.
pub fn estimate(wire: &[ChatMessage], specs: &[ToolSpec]) -> usize {
    let specs = serde_json::to_string(specs).unwrap_or_default();
    wire.iter().map(tokens).sum::<usize>() + estimate_tokens(&specs)
}

const STUB_HEAD: &str = "[tool result left out of this request to fit the context window: ";

fn stub(chars: usize) -> String {
    format!("{STUB_HEAD}{chars} characters; the whole result is stored with this turn]")
}

/// Shrinks `wire` (system prompt, then `history`, then the opening request at `*opening` —
/// `history.len() + 1` until a shrink has projected the history — then this turn's tool
/// groups) when its estimate passes the budget. `None` when it was within the budget.
pub fn shrink(
    wire: &mut Vec<ChatMessage>,
    history: &[StoredMessage],
    opening_at: &mut usize,
    specs: &[ToolSpec],
    b: InTurnBudget,
) -> Option<Shrunk> {
    let before = estimate(wire, specs);
    if before <= b.budget_tokens {
        return None;
    }
    let opening = *opening_at;
    if wire.len() <= opening || wire[opening].role != Role::User {
        return None;
    }
    // Tool groups of this turn: each starts at an assistant message.
    let starts: Vec<usize> = (opening + 1..wire.len())
        .filter(|&i| wire[i].role == Role::Assistant)
        .collect();
    // Newest groups kept whole while they fit the tail; the newest always.
    let mut kept_from = wire.len();
    let mut used = 0;
    for (n, &s) in starts.iter().enumerate().rev() {
        let end = starts.get(n + 1).copied().unwrap_or(wire.len());
        let t: usize = wire[s..end].iter().map(tokens).sum();
        if kept_from != wire.len() && used + t > b.tail_tokens {
            break;
        }
        used += t;
        kept_from = s;
    }
    let mut stubbed = 0;
    for m in &mut wire[opening + 1..kept_from] {
        let stubbed_before = m
            .content
            .as_deref()
            .is_some_and(|c| c.starts_with(STUB_HEAD));
        if m.role == Role::Tool && !stubbed_before {
            let chars = m.content.as_deref().map_or(0, |c| c.chars().count());
            let s = stub(chars);
            if chars > s.chars().count() {
                m.content = Some(s);
                stubbed += 1;
            }
        }
    }
    let mut projected = 0;
    // The history is still verbatim in the request (not yet one projection): fold it.
    let verbatim = opening == history.len() + 1 && history.len() > 1;
    if estimate(wire, specs) > b.budget_tokens && verbatim {
        let proj: Vec<ProjMessage> = history.iter().map(to_proj).collect();
        let text = project(&proj, None, projection_budget_chars(b.window));
        wire.splice(1..opening, [ChatMessage::new(Role::User, carrier(&text))]);
        projected = history.len();
        *opening_at = 2;
    }
    Some(Shrunk {
        before,
        after: estimate(wire, specs),
        stubbed,
        projected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ToolCall;

    fn stored(id: i64, role: Role, text: &str) -> StoredMessage {
        let mut m = StoredMessage::committed(
            id,
            &"s".into(),
            &crate::store::NewMessage::new(role, text.to_string()),
            0,
        );
        m.id = id;
        m
    }

    fn group(wire: &mut Vec<ChatMessage>, n: usize, result: &str) {
        wire.push(ChatMessage::tool_calls(
            None,
            vec![ToolCall {
                id: format!("c{n}"),
                name: "read".into(),
                arguments: "{}".into(),
            }],
        ));
        wire.push(ChatMessage::tool_result(&format!("c{n}"), result));
    }

    #[test]
    fn keeps_system_opening_request_and_whole_groups() {
        let history: Vec<StoredMessage> = (1..=6)
            .map(|i| {
                let role = if i % 2 == 1 {
                    Role::User
                } else {
                    Role::Assistant
                };
                stored(
                    i,
                    role,
                    &format!("old message {i} {}", "words ".repeat(400)),
                )
            })
            .collect();
        let mut wire =
            crate::agent::turn::history_to_wire("SYSTEM PROMPT", &history, &Default::default());
        wire.push(ChatMessage::new(
            Role::User,
            "Don't change it yet. Check the blast radius.",
        ));
        for n in 0..6 {
            group(&mut wire, n, &format!("log {n} {}", "line ".repeat(2_000)));
        }
        let b = InTurnBudget {
            budget_tokens: 4_000,
            tail_tokens: 3_000,
            window: 8_000,
        };
        let again = wire.clone();
        let mut opening = history.len() + 1;
        let s = shrink(&mut wire, &history, &mut opening, &[], b).expect("over the budget");
        assert_eq!(opening, 2);
        assert!(
            s.after < s.before && s.stubbed == 5 && s.projected == 6,
            "{s:?}"
        );
        assert_eq!(wire[0].content.as_deref(), Some("SYSTEM PROMPT"));
        assert!(wire[1].content.as_deref().unwrap().contains("[#1]"));
        assert_eq!(
            wire[2].content.as_deref(),
            Some("Don't change it yet. Check the blast radius.")
        );
        // Every call is followed by its result; the newest result is whole.
        for (i, m) in wire.iter().enumerate() {
            if m.role == Role::Assistant {
                assert_eq!(
                    wire[i + 1].tool_call_id.as_deref(),
                    Some(m.tool_calls[0].id.as_str())
                );
            }
        }
        assert!(wire
            .last()
            .unwrap()
            .content
            .as_deref()
            .unwrap()
            .starts_with("log 5 line"));
        // Deterministic: same input, same bytes.
        let mut w2 = again;
        shrink(&mut w2, &history, &mut (history.len() + 1), &[], b);
        assert_eq!(w2, wire);
        // Within the budget nothing changes.
        let before = wire.clone();
        let big = InTurnBudget {
            budget_tokens: 1_000_000,
            ..b
        };
        assert!(shrink(&mut wire, &history, &mut opening, &[], big).is_none());
        assert_eq!(before, wire);
        // The next iteration adds a group: the shrink finds the opening request where the
        // last one left it and stubs the group that is no longer the newest.
        group(&mut wire, 6, &format!("log 6 {}", "line ".repeat(2_000)));
        let s = shrink(&mut wire, &history, &mut opening, &[], b).expect("over again");
        assert_eq!((s.stubbed, s.projected), (1, 0), "{s:?}");
        assert_eq!(
            wire[2].content.as_deref(),
            Some("Don't change it yet. Check the blast radius.")
        );
        let older = wire[wire.len() - 3].content.as_deref().unwrap();
        assert!(older.starts_with("[tool result left out"), "{older}");
    }
}
