//! The cache plan: where a request spends Anthropic's four cache breakpoints.
//!
//! One goes on the end of the system prompt (with the tools before it, the stable prefix of
//! every turn of a session) and up to three on the last messages that are legal boundaries,
//! which move forward every turn: each turn writes the messages it added and the next turn
//! reads them back. Never more than four in all (the API refuses a fifth).
//!
//! A legal boundary is the end of a user message (a person's text, or the merged results of
//! one round of tool calls: never the middle of a tool run) or of an assistant message of
//! plain text. An assistant message asking for tools is the middle of a transaction, so it
//! gets none. The plan only adds `cache_control` to blocks of a copy of the request: the bytes
//! of everything else are those of the translation, so a turn's prefix is byte-identical to
//! the previous turn's (the unit tests check that) and nothing stored ever carries markup.

use serde_json::{json, Value};

use super::anthropic_wire::{WireMessage, WireRequest};

/// Breakpoints on messages; one more goes on the system prompt.
pub(super) const MESSAGE_BREAKPOINTS: usize = 3;
/// What the API accepts in one request.
pub(super) const MAX_BREAKPOINTS: usize = 4;

/// Which breakpoints a request carries (`Full` is what the provider sends; the others exist to
/// measure what the plan is worth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachePlan {
    /// No breakpoint at all.
    Off,
    /// Only the end of the system prompt.
    SystemOnly,
    /// The system prompt and the last three legal message boundaries.
    Full,
}

fn mark(block: &mut Value) {
    block["cache_control"] = json!({ "type": "ephemeral" });
}

/// Whether the end of `m` is a place a later request reproduces byte for byte.
fn is_boundary(m: &WireMessage) -> bool {
    m.role == "user" || !m.content.iter().any(|b| b["type"] == "tool_use")
}

/// Marks the request in place; returns how many breakpoints it placed.
pub(super) fn apply(plan: CachePlan, w: &mut WireRequest) -> usize {
    if plan == CachePlan::Off {
        return 0;
    }
    let mut placed = 0;
    if let Some(last) = w.system.last_mut() {
        mark(last);
        placed += 1;
    }
    if plan == CachePlan::SystemOnly {
        return placed;
    }
    let budget = MESSAGE_BREAKPOINTS.min(MAX_BREAKPOINTS - placed);
    let chosen: Vec<usize> = w
        .messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| is_boundary(m) && !m.content.is_empty())
        .take(budget)
        .map(|(i, _)| i)
        .collect();
    for i in chosen {
        if let Some(block) = w.messages[i].content.last_mut() {
            mark(block);
            placed += 1;
        }
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::super::anthropic_wire::wire_request;
    use super::*;
    use crate::domain::{Role, ToolCall};
    use crate::llm::{ChatMessage, ChatRequest};

    fn planned(messages: &[ChatMessage]) -> WireRequest {
        let mut w = wire_request(&ChatRequest {
            messages: messages.to_vec(),
            tools: Vec::new(),
        });
        apply(CachePlan::Full, &mut w);
        w
    }

    fn marked(w: &WireRequest) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (i, m) in w.messages.iter().enumerate() {
            for (j, b) in m.content.iter().enumerate() {
                if b.get("cache_control").is_some() {
                    out.push((i, j));
                }
            }
        }
        out
    }

    /// Every block as (role, JSON without `cache_control`), in order: what a cache prefix is.
    fn flat(w: &WireRequest) -> Vec<String> {
        w.messages
            .iter()
            .flat_map(|m| {
                m.content.iter().map(move |b| {
                    let mut b = b.clone();
                    b.as_object_mut().map(|o| o.remove("cache_control"));
                    format!("{}:{b}", m.role)
                })
            })
            .collect()
    }

    fn tool_round(id: &str) -> Vec<ChatMessage> {
        let call = |n: &str| ToolCall {
            id: format!("{id}{n}"),
            name: "clock".into(),
            arguments: "{}".into(),
        };
        vec![
            ChatMessage::tool_calls(None, vec![call("a"), call("b")]),
            ChatMessage::tool_result(&format!("{id}a"), "one"),
            ChatMessage::tool_result(&format!("{id}b"), "two"),
        ]
    }

    fn conversation(turns: usize) -> Vec<Vec<ChatMessage>> {
        let mut history = vec![ChatMessage::new(Role::System, "you are herald")];
        let mut requests = Vec::new();
        for t in 0..turns {
            history.push(ChatMessage::new(Role::User, format!("question {t}")));
            if t == 2 {
                requests.push(history.clone());
                history.extend(tool_round(&format!("t{t}")));
            }
            requests.push(history.clone());
            history.push(ChatMessage::new(Role::Assistant, format!("answer {t}")));
        }
        requests
    }

    #[test]
    fn system_and_the_last_three_boundaries_never_more_than_four() {
        for req in conversation(6) {
            let w = planned(&req);
            assert!(w.system[0].get("cache_control").is_some());
            let m = marked(&w);
            assert!(m.len() <= MESSAGE_BREAKPOINTS, "{m:?}");
            assert_eq!(m.len(), w.messages.len().min(3), "{m:?}");
            // Each mark is on a message's last block, never on a tool_use.
            for (i, j) in m {
                assert_eq!(j + 1, w.messages[i].content.len());
                assert_ne!(w.messages[i].content[j]["type"], "tool_use");
            }
        }
    }

    #[test]
    fn a_tool_run_is_cut_only_after_its_last_result() {
        let mut req = vec![
            ChatMessage::new(Role::System, "sys"),
            ChatMessage::new(Role::User, "q"),
        ];
        req.extend(tool_round("x"));
        let w = planned(&req);
        // user q, assistant tool_use x2, user results x2: the assistant is skipped.
        assert_eq!(marked(&w), vec![(0, 0), (2, 1)]);
    }

    #[test]
    fn each_request_starts_with_the_previous_ones_bytes() {
        let reqs = conversation(8);
        let system = serde_json::to_string(&planned(&reqs[0]).system).unwrap();
        for pair in reqs.windows(2) {
            let (a, b) = (planned(&pair[0]), planned(&pair[1]));
            assert_eq!(serde_json::to_string(&b.system).unwrap(), system);
            let (fa, fb) = (flat(&a), flat(&b));
            assert_eq!(fa[..], fb[..fa.len()], "the older request is not a prefix");
            // Where the older request put its last breakpoint, the newer one can read it: the
            // block is in the same place with the same bytes.
            let (i, j) = *marked(&a).last().unwrap();
            assert_eq!(
                a.messages[i].content[j]["text"],
                b.messages[i].content[j]["text"]
            );
        }
    }

    #[test]
    fn off_and_system_only_place_what_they_say() {
        let req = &conversation(3)[2];
        let mut w = wire_request(&ChatRequest {
            messages: req.clone(),
            tools: Vec::new(),
        });
        let plain = w.clone();
        assert_eq!(apply(CachePlan::Off, &mut w), 0);
        assert_eq!(w, plain);
        assert_eq!(apply(CachePlan::SystemOnly, &mut w), 1);
        assert!(marked(&w).is_empty());
    }
}
