//! Deterministic context compaction: the middle of a long conversation becomes a projection of
//! the facts an agent needs next (goal, errors and fixes, files, commands with their final
//! outcomes, error names, a size-capped session log), every line citing `[#N]`, the id of the
//! stored message it quotes.
//!
//! Pure code: no I/O, no store, no model call. Same input, same bytes, so the behaviour can be
//! tested against golden files. The caller (the turn) picks the split with [`select_middle`],
//! maps stored rows to [`ProjMessage`], calls [`project`] and stores [`carrier`]`(projection)` in
//! the compaction transaction. This module must not decide *when* to compact (that is the
//! trigger and its breaker) and must never paraphrase: it quotes or shortens.

mod args;
mod budget;
mod extract;
mod faithful;
mod fit;
mod log;
mod parse;
mod project;
mod sanitize;
mod scan;
mod sections;

use serde::{Deserialize, Serialize};

use crate::domain::{Role, ToolCall};

pub use budget::{estimate_tokens, projection_budget_chars, select_middle, Split};
pub use faithful::{check_faithful, Unfaithful};
pub use project::{carrier, project, CARRIER_FOOTER, CARRIER_HEADER};
pub use sanitize::{clean_text, one_line};

/// One stored message as the projector sees it. `id` is the store's row id: it is what `[#N]`
/// cites and what `session_search(around_message_id = N)` opens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjMessage {
    pub id: i64,
    pub role: Role,
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
}

#[cfg(test)]
mod rule_tests;
