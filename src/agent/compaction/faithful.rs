//! The faithfulness check: every word of every session-log excerpt must be a word of the
//! message the line cites. A bag-of-words test, so it proves "quoted, not invented", not
//! completeness, and it does not look at the structured sections.
//!
//! Lives beside the projector so tests and an operator command can run it on real output; it
//! must stay independent of how the projector builds lines (it re-reads the messages itself).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::parse::cited;
use super::sanitize::{is_unspaced_script, one_line, strip_json_csi};
use super::sections::{HEADINGS, SESSION_LOG};
use super::ProjMessage;

/// A session-log line that does not quote the message it cites (`line` counts from 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfaithful {
    #[error("line {line}: no [#N]: {text}")]
    NoCitation { line: usize, text: String },
    #[error("line {line}: cites unknown message #{id}")]
    UnknownMessage { line: usize, id: i64 },
    #[error("line {line}: word {word:?} is not in message #{id}: {text}")]
    NotQuoted {
        line: usize,
        word: String,
        id: i64,
        text: String,
    },
}

/// Checks the session log of `projection` against `messages`, which must include every message
/// a log line cites (after a merge, that is the earlier middles too).
pub fn check_faithful(projection: &str, messages: &[ProjMessage]) -> Result<(), Unfaithful> {
    let by_id: HashMap<i64, &ProjMessage> = messages.iter().map(|m| (m.id, m)).collect();
    let mut sources: HashMap<i64, Source> = HashMap::new();
    let mut in_log = false;
    for (number, line) in projection.lines().enumerate() {
        if HEADINGS.contains(&line) {
            in_log = line == SESSION_LOG;
            continue;
        }
        if !in_log || line.starts_with("[… ") || line.is_empty() {
            continue;
        }
        let (id, body) = cited(line).ok_or_else(|| Unfaithful::NoCitation {
            line: number + 1,
            text: line.to_string(),
        })?;
        let message = by_id.get(&id).ok_or(Unfaithful::UnknownMessage {
            line: number + 1,
            id,
        })?;
        let source = sources.entry(id).or_insert_with(|| Source::of(message));
        let quote = body.split_once(": ").map_or("", |(_, q)| q);
        for word in words(quote) {
            if !source.contains(word) {
                return Err(Unfaithful::NotQuoted {
                    line: number + 1,
                    word: word.to_string(),
                    id,
                    text: line.to_string(),
                });
            }
        }
    }
    Ok(())
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// The cleaned text of a message (content, tool names, raw and decoded arguments) and its words.
struct Source {
    text: String,
    words: HashSet<String>,
}

impl Source {
    fn of(m: &ProjMessage) -> Source {
        let mut parts = vec![one_line(&m.content)];
        // JSON-wrapped output: a quote may start or end at a `\n` escape (see `scan::line_at`),
        // so the words between escapes count as words of the message too.
        if m.content.contains('\\') {
            let unescaped = m
                .content
                .replace("\\n", " ")
                .replace("\\t", " ")
                .replace("\\r", " ");
            parts.push(one_line(&unescaped));
            // Tool output is quoted without its JSON-escaped colour codes (`excerpt_output`).
            parts.push(one_line(&strip_json_csi(&m.content)));
            parts.push(one_line(&strip_json_csi(&unescaped)));
        }
        parts.extend(m.tool_name.as_deref().map(one_line));
        for tc in &m.tool_calls {
            parts.push(one_line(&tc.name));
            parts.push(one_line(&tc.arguments));
            if let Ok(args) = serde_json::from_str::<Value>(&tc.arguments) {
                collect_strings(&args, &mut parts);
            }
        }
        let text = parts.join(" ");
        let words = words(&text).map(str::to_string).collect();
        Source { text, words }
    }

    /// Spaced scripts compare whole words; in scripts without spaces any run of characters is a
    /// quote, so those compare as substrings.
    fn contains(&self, word: &str) -> bool {
        self.words.contains(word)
            || (word.chars().any(is_unspaced_script) && self.text.contains(word))
    }
}

fn collect_strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(one_line(s)),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}
