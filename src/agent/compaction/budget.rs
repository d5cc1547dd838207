//! Sizes: how large a projection may be, a cheap token estimate, and which messages form the
//! compactable middle (head and tail stay verbatim).
//!
//! The estimate is deliberately rough; the trigger re-anchors it on the provider's billed
//! counts. This module must not decide when to compact, only what a compaction would cover.

use std::ops::Range;

use crate::domain::Role;

use super::project::CARRIER_HEADER;
use super::sanitize::is_unspaced_script;
use super::ProjMessage;

/// Share of the context window a projection may take: 6 % (the vcc default `budget_ratio`).
pub const BUDGET_RATIO_PERCENT: usize = 6;
/// Never smaller than this many tokens, or a small window gets a projection too thin to keep
/// the goal, the commands and a useful log (vcc `min_budget_tokens`).
pub const MIN_BUDGET_TOKENS: usize = 1_500;
/// Never larger than this many tokens: past it the projection starts to crowd the window it is
/// meant to free (vcc `max_budget_tokens`).
pub const MAX_BUDGET_TOKENS: usize = 8_000;
/// The floor yields to this share of the window, so a tiny window is not eaten by its summary.
pub const MAX_WINDOW_SHARE_PERCENT: usize = 25;
/// Characters per token used to turn the token budget into characters. Projections are mostly
/// ASCII identifiers, paths and English (about 3.5–4 characters per token); 3 errs towards a
/// projection slightly smaller than its budget rather than larger.
pub const CHARS_PER_TOKEN: usize = 3;
/// Tokens charged per message for role markers and framing.
pub const MESSAGE_OVERHEAD_TOKENS: usize = 4;

/// The projection budget, in characters, for a model with `context_window_tokens`.
pub fn projection_budget_chars(context_window_tokens: usize) -> usize {
    let share = context_window_tokens.saturating_mul(BUDGET_RATIO_PERCENT) / 100;
    let tokens = share.clamp(MIN_BUDGET_TOKENS, MAX_BUDGET_TOKENS);
    let hard_cap = context_window_tokens.saturating_mul(MAX_WINDOW_SHARE_PERCENT) / 100;
    tokens.min(hard_cap).saturating_mul(CHARS_PER_TOKEN)
}

/// A rough token count: Latin-script text at about 4 characters per token, Cyrillic, Greek,
/// Arabic, Hebrew, Indic and Thai at about 2, CJK at about 1 per character, and any other
/// symbol (emoji, box drawing) at 1. Rounds up, so non-empty text is at least one token.
pub fn estimate_tokens(text: &str) -> usize {
    let (mut quarter, mut half, mut whole) = (0usize, 0usize, 0usize);
    for c in text.chars() {
        if c.is_ascii()
            || ('\u{00A0}'..='\u{024F}').contains(&c)
            || ('\u{2000}'..='\u{206F}').contains(&c)
        {
            quarter += 1;
        } else if is_unspaced_script(c) {
            whole += 1;
        } else if ('\u{0370}'..='\u{0E7F}').contains(&c) {
            half += 1;
        } else {
            whole += 1;
        }
    }
    quarter.div_ceil(4) + half.div_ceil(2) + whole
}

/// Estimated tokens of one message as sent: content, tool calls and framing.
pub fn message_tokens(m: &ProjMessage) -> usize {
    let calls: usize = m
        .tool_calls
        .iter()
        .map(|c| estimate_tokens(&c.name) + estimate_tokens(&c.arguments))
        .sum();
    estimate_tokens(&m.content) + calls + MESSAGE_OVERHEAD_TOKENS
}

/// Where a compaction cuts: `head` and `tail` stay verbatim, `middle` is projected.
/// The three ranges are adjacent and cover the whole slice; `middle` may be empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub head: Range<usize>,
    pub middle: Range<usize>,
    pub tail: Range<usize>,
}

/// Chooses the middle to compact.
///
/// - Head: everything up to and including the first assistant reply to the first user message
///   (leading system messages included), plus that reply's tool results.
/// - Tail: newest messages back to `tail_budget_tokens`, never more than half the window (a
///   tail that large would leave the compaction nothing to free).
/// - An assistant message with tool calls and its tool results always land on the same side.
/// - The latest real user request (not a carrier) is always in the tail, whatever its size.
pub fn select_middle(
    messages: &[ProjMessage],
    window_tokens: usize,
    tail_budget_tokens: usize,
) -> Split {
    let n = messages.len();
    let head_end = head_end(messages);
    let budget = tail_budget_tokens.min(window_tokens / 2);

    let mut start = n;
    let mut used = 0usize;
    while start > head_end {
        let cost = message_tokens(&messages[start - 1]);
        if used + cost > budget {
            break;
        }
        used += cost;
        start -= 1;
    }
    // A tail must not open with tool results whose call stays behind: leave them to the middle.
    while start < n && messages[start].role == Role::Tool {
        start += 1;
    }
    let latest_user = messages
        .iter()
        .rposition(|m| m.role == Role::User && !m.content.starts_with(CARRIER_HEADER));
    if let Some(u) = latest_user {
        start = start.min(u);
    }
    let start = start.max(head_end);
    Split {
        head: 0..head_end,
        middle: head_end..start,
        tail: start..n,
    }
}

fn head_end(messages: &[ProjMessage]) -> usize {
    let Some(first_user) = messages.iter().position(|m| m.role == Role::User) else {
        return 0;
    };
    let Some(reply) = messages[first_user..]
        .iter()
        .position(|m| m.role == Role::Assistant)
        .map(|p| first_user + p)
    else {
        return messages.len();
    };
    let mut end = reply + 1;
    while end < messages.len() && messages[end].role == Role::Tool {
        end += 1;
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_a_share_between_floor_and_ceiling() {
        let table = [
            (4_000, 1_000 * CHARS_PER_TOKEN),  // 25 % hard cap beats the floor
            (8_000, 1_500 * CHARS_PER_TOKEN),  // floor
            (64_000, 3_840 * CHARS_PER_TOKEN), // 6 %
            (128_000, 7_680 * CHARS_PER_TOKEN),
            (1_000_000, 8_000 * CHARS_PER_TOKEN), // ceiling
            (0, 0),
        ];
        for (window, want) in table {
            assert_eq!(projection_budget_chars(window), want, "window {window}");
        }
    }

    #[test]
    fn estimate_follows_the_script() {
        let table = [
            ("", 0),
            ("abcd", 1),
            ("abcde", 2),
            ("hello world, this is forty characters!!!", 10),
            ("日本語のテキスト", 8),
            ("привет мир", 6),
            ("ab日本", 3),
            ("🙂🙂", 2),
        ];
        for (text, want) in table {
            assert_eq!(estimate_tokens(text), want, "text {text:?}");
        }
    }
}
