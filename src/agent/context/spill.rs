//! Large tool results in context: the stored row keeps the whole result (searchable, pageable),
//! and the model sees a preview, the size, and the exact call that pages it back in.
//!
//! A view applied when the history is loaded for a request, never a rewrite of the row: the
//! same row gives the same preview bytes every turn (the provider's prompt cache holds), and
//! a larger `spill_chars` later shows the whole result again. It must not touch `content`.

use crate::domain::Role;
use crate::store::StoredMessage;

/// Characters one page of `session_search(..., offset=K)` returns.
pub const PAGE_CHARS: usize = 8_000;

/// The preview text for a tool result over `spill_chars`, or `None` when it fits.
pub fn spilled_wire(
    session_id: &str,
    id: i64,
    role: Role,
    wire: &str,
    spill_chars: usize,
) -> Option<String> {
    if role != Role::Tool || spill_chars == 0 {
        return None;
    }
    let total = wire.chars().count();
    if total <= spill_chars {
        return None;
    }
    // Head and tail: a command's last lines (exit status, summary) matter as much as its first.
    let budget = (spill_chars / 2).clamp(200, 4_000);
    let head_n = budget * 3 / 4;
    let tail_n = budget - head_n;
    let head: String = wire.chars().take(head_n).collect();
    let tail: String = wire.chars().skip(total - tail_n).collect();
    Some(format!(
        "[Large tool result: {total} characters, kept whole as message #{id}. Shown: the first \
         {head_n} and the last {tail_n} characters. To read the rest, call session_search with \
         session_id=\"{session_id}\", around_message_id={id}, offset=0 (then the next_offset it \
         returns); each call returns {PAGE_CHARS} characters.]\n{head}\n[… {} characters not \
         shown …]\n{tail}",
        total - head_n - tail_n
    ))
}

/// Replaces, in memory, what the model will see of each oversized tool result.
pub fn spill_view(history: &mut [StoredMessage], spill_chars: usize) {
    for m in history.iter_mut() {
        if let Some(p) = spilled_wire(&m.session_id, m.id, m.role, m.wire_content(), spill_chars) {
            m.api_content = Some(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_long_tool_results_spill() {
        let long = format!("{}exit 1", "x".repeat(20_000));
        let table = [
            (Role::Tool, "short".to_string(), false),
            (Role::Tool, "y".repeat(8_000), false),
            (Role::Tool, long.clone(), true),
            (Role::User, long.clone(), false),
            (Role::Assistant, long.clone(), false),
        ];
        for (role, text, spills) in table {
            let p = spilled_wire("s1", 42, role, &text, 8_000);
            assert_eq!(p.is_some(), spills, "{role:?} {}", text.len());
        }
        let p = spilled_wire("s1", 42, Role::Tool, &long, 8_000).unwrap();
        assert!(p.starts_with("[Large tool result: 20006 characters, kept whole as message #42."));
        assert!(p.contains("session_id=\"s1\", around_message_id=42, offset=0"));
        assert!(p.ends_with("exit 1"), "the tail is shown");
        assert!(p.chars().count() < 4_700, "{}", p.chars().count());
    }
}
