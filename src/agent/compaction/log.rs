//! Pairing tool calls with their results, and the session log: one excerpt line per message
//! (plus one line per tool call), each starting with `[#N]` and a fixed label.
//!
//! Log lines quote or shorten, never paraphrase: after the label and `: `, every word must be a
//! word of the cited message (`faithful.rs` checks exactly this). The label grammar is
//! `user` | `assistant` | `system` | `→ TOOL` | `← TOOL STATUS`.

use std::collections::HashMap;

use crate::domain::Role;

use super::extract::{call_facts, result_outcome, CallFacts, Outcome};
use super::sanitize::{excerpt, one_line, shorten};
use super::scan::error_line;
use super::ProjMessage;

/// Characters kept of one message in the session log.
pub const LOG_QUOTE_CHARS: usize = 240;
/// Characters kept of a tool call's main argument in the session log.
pub const LOG_ARG_CHARS: usize = 160;

/// One tool call with its result, in call order.
#[derive(Debug, Clone)]
pub struct Call {
    pub call_msg_id: i64,
    pub tool: String,
    pub facts: CallFacts,
    pub result: Option<CallResult>,
}

#[derive(Debug, Clone)]
pub struct CallResult {
    pub msg_index: usize,
    pub msg_id: i64,
    pub outcome: Outcome,
}

impl Call {
    /// The identity two calls share when one repeats the other: the command, or the tool and
    /// its main argument.
    pub fn key(&self) -> String {
        let arg = |a: &str| super::sections::quote_part(&shorten(a, super::sections::KEY_CHARS));
        match (&self.facts.command, &self.facts.main_arg) {
            (Some(cmd), _) => format!("`{}`", arg(cmd)),
            (None, Some(main)) => format!("{} `{}`", tool_label(&self.tool), arg(main)),
            (None, None) => tool_label(&self.tool),
        }
    }
}

/// Tool names are printed in labels; they must stay one plain token.
pub fn tool_label(name: &str) -> String {
    let cleaned: String = one_line(name)
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || "_-.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "tool".to_string()
    } else {
        cleaned
    }
}

/// Tool calls paired with their results, and where each message sits in that pairing.
#[derive(Debug, Default)]
pub struct Pairing {
    pub calls: Vec<Call>,
    /// For each message: the call its result answers (tool messages only).
    pub result_of_msg: Vec<Option<usize>>,
    /// For each message: the index of its first call (an assistant's calls are consecutive).
    pub first_call_of_msg: Vec<usize>,
}

/// Matches results to calls by `tool_call_id`, falling back to the oldest call still waiting
/// when a result carries no id (older stores did not record it).
pub fn pair_calls(messages: &[ProjMessage]) -> Pairing {
    let mut p = Pairing {
        calls: Vec::new(),
        result_of_msg: vec![None; messages.len()],
        first_call_of_msg: Vec::with_capacity(messages.len()),
    };
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    // Calls are only ever answered, never un-answered, so the oldest waiting call only moves on.
    let mut oldest_waiting = 0;
    for (index, m) in messages.iter().enumerate() {
        p.first_call_of_msg.push(p.calls.len());
        match m.role {
            Role::Assistant => {
                for tc in &m.tool_calls {
                    by_id.insert(tc.id.as_str(), p.calls.len());
                    p.calls.push(Call {
                        call_msg_id: m.id,
                        tool: tc.name.clone(),
                        facts: call_facts(&tc.name, &tc.arguments),
                        result: None,
                    });
                }
            }
            Role::Tool => {
                while oldest_waiting < p.calls.len() && p.calls[oldest_waiting].result.is_some() {
                    oldest_waiting += 1;
                }
                let slot = m
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| by_id.get(id).copied())
                    .filter(|&c| p.calls[c].result.is_none())
                    .or((oldest_waiting < p.calls.len()).then_some(oldest_waiting));
                if let Some(c) = slot {
                    let call = &mut p.calls[c];
                    call.result = Some(CallResult {
                        msg_index: index,
                        msg_id: m.id,
                        outcome: result_outcome(&m.content, call.facts.command.is_some()),
                    });
                    p.result_of_msg[index] = Some(c);
                }
            }
            _ => {}
        }
    }
    p
}

/// How many session-log lines message `index` gets, without building them.
pub fn log_line_count(messages: &[ProjMessage], index: usize) -> usize {
    let m = &messages[index];
    match m.role {
        Role::Assistant => {
            let text = !m.tool_calls.is_empty() && !excerpt(&m.content, 1).is_empty();
            usize::from(text || m.tool_calls.is_empty()) + m.tool_calls.len()
        }
        _ => 1,
    }
}

/// Session-log lines for message `index`.
pub fn log_lines(messages: &[ProjMessage], index: usize, pairing: &Pairing) -> Vec<String> {
    let m = &messages[index];
    let with_quote = |label: String, text: String| {
        if text.is_empty() {
            format!("[#{}] {label}", m.id)
        } else {
            format!("[#{}] {label}: {text}", m.id)
        }
    };
    let mut out = Vec::new();
    match m.role {
        Role::User | Role::System => {
            out.push(with_quote(
                m.role.as_str().to_string(),
                excerpt(&m.content, LOG_QUOTE_CHARS),
            ));
        }
        Role::Assistant => {
            let text = excerpt(&m.content, LOG_QUOTE_CHARS);
            if !text.is_empty() || m.tool_calls.is_empty() {
                out.push(with_quote("assistant".to_string(), text));
            }
            let first = pairing.first_call_of_msg[index];
            for (tc, call) in m.tool_calls.iter().zip(&pairing.calls[first..]) {
                let arg = match &call.facts.main_arg {
                    Some(a) => format!("`{}`", shorten(a, LOG_ARG_CHARS).replace('`', "'")),
                    None => excerpt(&tc.arguments, LOG_ARG_CHARS),
                };
                out.push(with_quote(format!("→ {}", tool_label(&tc.name)), arg));
            }
        }
        Role::Tool => {
            let call = pairing.result_of_msg[index].map(|c| &pairing.calls[c]);
            let name = m
                .tool_name
                .clone()
                .or_else(|| call.map(|c| c.tool.clone()))
                .unwrap_or_else(|| "tool".to_string());
            let outcome = call
                .and_then(|c| c.result.as_ref())
                .map_or_else(|| result_outcome(&m.content, false), |r| r.outcome);
            let text = if outcome.is_failed() {
                error_line(&m.content, LOG_QUOTE_CHARS)
                    .unwrap_or_else(|| excerpt(&m.content, LOG_QUOTE_CHARS))
            } else {
                excerpt(&m.content, LOG_QUOTE_CHARS)
            };
            out.push(with_quote(
                format!("← {} {}", tool_label(&name), outcome.label()),
                text,
            ));
        }
    }
    out
}
