//! Pairing tool calls with their results, and the session log: one excerpt line per message
//! (plus one line per tool call), each starting with `[#N]` and a fixed label.
//!
//! Log lines quote or shorten, never paraphrase: after the label and `: `, every word must be a
//! word of the cited message (`faithful.rs` checks exactly this). The label grammar is
//! `user` | `assistant` | `system` | `→ TOOL` | `← TOOL STATUS`.

use std::borrow::Cow;
use std::collections::HashMap;

use foldhash::fast::RandomState;

use crate::domain::Role;

use super::extract::{call_facts, result_outcome, CallFacts, Outcome};
use super::sanitize::{excerpt, excerpt_output, one_line, shorten};
use super::scan::error_line;
use super::sections::{key_part, push_cite};
use super::ProjMessage;

/// Characters kept of one message in the session log.
pub const LOG_QUOTE_CHARS: usize = 240;
/// Characters kept of a tool call's main argument in the session log.
pub const LOG_ARG_CHARS: usize = 160;

/// One tool call with its result, in call order.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub call_msg_id: i64,
    pub tool: &'a str,
    pub facts: CallFacts<'a>,
    pub result: Option<CallResult>,
}

#[derive(Debug, Clone)]
pub struct CallResult {
    pub msg_index: usize,
    pub msg_id: i64,
    pub outcome: Outcome,
}

impl Call<'_> {
    /// The identity two calls share when one repeats the other: the command, or the tool and
    /// its main argument.
    pub fn key(&self) -> String {
        let quoted = |prefix: &str, arg: &str| {
            let arg = key_part(arg);
            let mut key = String::with_capacity(prefix.len() + arg.len() + 2);
            key.push_str(prefix);
            key.push('`');
            key.push_str(&arg);
            key.push('`');
            key
        };
        match (&self.facts.command, &self.facts.main_arg) {
            (Some(cmd), _) => quoted("", cmd),
            (None, Some(main)) => quoted(&(tool_label(self.tool) + " "), main),
            (None, None) => tool_label(self.tool).into_owned(),
        }
    }
}

/// Tool names are printed in labels; they must stay one plain token.
pub fn tool_label(name: &str) -> Cow<'_, str> {
    // The usual name is already such a token (and clean text, so `one_line` keeps it).
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"_-.".contains(&b);
    if !name.is_empty() && name.bytes().all(plain) {
        return Cow::Borrowed(name);
    }
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
    Cow::Owned(if cleaned.is_empty() {
        "tool".to_string()
    } else {
        cleaned
    })
}

/// Tool calls paired with their results, and where each message sits in that pairing.
#[derive(Debug, Default)]
pub struct Pairing<'a> {
    pub calls: Vec<Call<'a>>,
    /// For each message: the call its result answers (tool messages only).
    pub result_of_msg: Vec<Option<usize>>,
    /// For each message: the index of its first call (an assistant's calls are consecutive).
    pub first_call_of_msg: Vec<usize>,
    /// Each call's `tool_call_id`, by call index.
    call_ids: Vec<&'a str>,
}

/// The latest call with a given id: the last [`RECENT_CALLS`] calls are searched directly, the
/// older ones through a map that is filled only when such a search misses.
#[derive(Default)]
struct LazyIndex<'a> {
    map: HashMap<&'a str, usize, RandomState>,
    /// Calls before this index are in `map`.
    mapped: usize,
}

const RECENT_CALLS: usize = 8;

impl<'a> LazyIndex<'a> {
    fn latest(&mut self, ids: &[&'a str], id: &str) -> Option<usize> {
        let recent = ids.len().saturating_sub(RECENT_CALLS);
        if let Some(back) = ids[recent..].iter().rev().position(|c| *c == id) {
            return Some(ids.len() - 1 - back);
        }
        // Not among the newest: the latest older call with the id, as a map of all calls
        // (later ones replacing earlier ones) would give.
        for (i, call_id) in ids[self.mapped..recent.max(self.mapped)].iter().enumerate() {
            self.map.insert(call_id, self.mapped + i);
        }
        self.mapped = self.mapped.max(recent);
        self.map.get(id).copied()
    }
}

/// Matches results to calls by `tool_call_id`, falling back to the oldest call still waiting
/// when a result carries no id (older stores did not record it).
pub fn pair_calls(messages: &[ProjMessage]) -> Pairing<'_> {
    let mut p = Pairing {
        call_ids: Vec::new(),
        calls: Vec::new(),
        result_of_msg: vec![None; messages.len()],
        first_call_of_msg: Vec::with_capacity(messages.len()),
    };
    // A result usually answers one of the last few calls; the map is built only for the rest.
    let mut by_id = LazyIndex::default();
    // Calls are only ever answered, never un-answered, so the oldest waiting call only moves on.
    let mut oldest_waiting = 0;
    for (index, m) in messages.iter().enumerate() {
        p.first_call_of_msg.push(p.calls.len());
        match m.role {
            Role::Assistant => {
                for tc in &m.tool_calls {
                    p.call_ids.push(tc.id.as_str());
                    p.calls.push(Call {
                        call_msg_id: m.id,
                        tool: &tc.name,
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
                    .and_then(|id| by_id.latest(&p.call_ids, id))
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

/// Appends the session-log lines of message `index` to `out`; `first_name` is where its first
/// error name starts.
pub fn log_lines(
    messages: &[ProjMessage],
    index: usize,
    pairing: &Pairing<'_>,
    first_name: Option<usize>,
    out: &mut Vec<String>,
) {
    let m = &messages[index];
    match m.role {
        Role::User | Role::System => {
            let text = excerpt(&m.content, LOG_QUOTE_CHARS);
            out.push(cited_line(m.id, &[m.role.as_str()], &[&text]));
        }
        Role::Assistant => {
            let text = excerpt(&m.content, LOG_QUOTE_CHARS);
            if !text.is_empty() || m.tool_calls.is_empty() {
                out.push(cited_line(m.id, &["assistant"], &[&text]));
            }
            let first = pairing.first_call_of_msg[index];
            for (tc, call) in m.tool_calls.iter().zip(&pairing.calls[first..]) {
                let label = tool_label(&tc.name);
                let line = match &call.facts.main_arg {
                    Some(a) => {
                        let short = shorten(a, LOG_ARG_CHARS);
                        let arg = if short.contains('`') {
                            Cow::Owned(short.replace('`', "'"))
                        } else {
                            short
                        };
                        cited_line(m.id, &["→ ", &label], &["`", &arg, "`"])
                    }
                    None => {
                        let text = excerpt(&tc.arguments, LOG_ARG_CHARS);
                        cited_line(m.id, &["→ ", &label], &[&text])
                    }
                };
                out.push(line);
            }
        }
        Role::Tool => {
            let call = pairing.result_of_msg[index].map(|c| &pairing.calls[c]);
            let name = m
                .tool_name
                .as_deref()
                .or_else(|| call.map(|c| c.tool))
                .unwrap_or("tool");
            let outcome = call
                .and_then(|c| c.result.as_ref())
                .map_or_else(|| result_outcome(&m.content, false), |r| r.outcome);
            let text = if outcome.is_failed() {
                error_line(&m.content, first_name, LOG_QUOTE_CHARS)
                    .unwrap_or_else(|| excerpt_output(&m.content, LOG_QUOTE_CHARS))
            } else {
                excerpt_output(&m.content, LOG_QUOTE_CHARS)
            };
            let label = ["← ", &tool_label(name), " ", &outcome.label()];
            out.push(cited_line(m.id, &label, &[&text]));
        }
    }
}

/// `[#N] LABEL: TEXT`, or `[#N] LABEL` when the text is empty, built in one allocation.
fn cited_line(id: i64, label: &[&str], text: &[&str]) -> String {
    let len: usize = label.iter().chain(text).map(|p| p.len()).sum();
    let mut out = String::with_capacity(len + 26);
    push_cite(&mut out, id);
    out.push(' ');
    label.iter().for_each(|p| out.push_str(p));
    if text.iter().any(|p| !p.is_empty()) {
        out.push_str(": ");
        text.iter().for_each(|p| out.push_str(p));
    }
    out
}
