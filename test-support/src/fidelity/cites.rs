//! What each stored message holds, for checking that a projection's `[#N]` points at the
//! message the line quotes: the command of the call a result answers, the text a message or its
//! tool-call arguments contain, the start of a user request.

use std::collections::HashMap;

use herald::agent::compaction::{one_line, ProjMessage};
use herald::domain::Role;
use serde_json::Value;

/// What each message holds, for checking citations: the command or arguments of the call a
/// result answers, and the text a message contains.
pub struct Facts<'a> {
    pub by_id: HashMap<i64, &'a ProjMessage>,
    /// Result id → (tool name, cleaned command if any, raw arguments).
    results: HashMap<i64, (&'a str, Option<String>, &'a str)>,
}

impl<'a> Facts<'a> {
    pub fn of(messages: &'a [ProjMessage]) -> Facts<'a> {
        let mut calls = HashMap::new();
        for m in messages {
            for tc in &m.tool_calls {
                calls.insert(tc.id.as_str(), tc);
            }
        }
        let mut results = HashMap::new();
        for m in messages.iter().filter(|m| m.role == Role::Tool) {
            let Some(tc) = m.tool_call_id.as_deref().and_then(|c| calls.get(c)) else {
                continue;
            };
            let args: Value = serde_json::from_str(&tc.arguments).unwrap_or(Value::Null);
            let command = args["command"].as_str().map(one_line);
            results.insert(m.id, (tc.name.as_str(), command, tc.arguments.as_str()));
        }
        Facts {
            by_id: messages.iter().map(|m| (m.id, m)).collect(),
            results,
        }
    }

    /// The command of the call whose result is message `id`.
    pub fn result_of(&self, id: i64) -> Option<&str> {
        self.results.get(&id).and_then(|r| r.1.as_deref())
    }

    /// Whether message `id` answers the call an error entry names: `` `cmd` `` or
    /// `` tool `arg` ``.
    pub fn answers(&self, id: i64, key: &str) -> bool {
        let Some((tool, command, args)) = self.results.get(&id) else {
            return false;
        };
        match key.strip_prefix('`').and_then(|k| k.strip_suffix('`')) {
            Some(cmd) => command.as_deref() == Some(cmd),
            None => key
                .split_once(" `")
                .is_some_and(|(t, arg)| t == *tool && args.contains(arg.trim_end_matches('`'))),
        }
    }

    /// Whether message `id` holds `text` in its content or its tool-call arguments.
    pub fn mentions(&self, id: i64, text: &str) -> bool {
        self.by_id.get(&id).is_some_and(|m| {
            m.content.contains(text) || m.tool_calls.iter().any(|tc| tc.arguments.contains(text))
        })
    }

    /// Whether `body` (`first request: …`) quotes user message `id` from its start.
    pub fn user_says(&self, id: i64, body: &str) -> bool {
        let quote = body.split_once(": ").map_or("", |(_, q)| q);
        let quote = quote.strip_suffix(" …").unwrap_or(quote);
        self.by_id
            .get(&id)
            .is_some_and(|m| m.role == Role::User && one_line(&m.content).starts_with(quote))
    }
}
