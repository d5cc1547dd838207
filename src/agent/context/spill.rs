//! Large tool results in context: the stored row keeps the whole result (searchable, pageable),
//! and the model sees a preview, the size, and the exact call that pages it back in.
//!
//! A view applied when the history is loaded for a request, never a rewrite of the row: the
//! same row gives the same preview bytes every turn (the provider's prompt cache holds), and
//! a larger `spill_chars` later shows the whole result again. It must not touch `content`.

use crate::agent::tools::page;
use crate::domain::Role;
use crate::store::StoredMessage;

/// Characters one page of `session_search(..., offset=K)` returns.
pub const PAGE_CHARS: usize = 8_000;
/// The tool that pages spilled results back in.
const SEARCH_TOOL: &str = "session_search";

/// Where the whole result can be paged from.
#[derive(Clone, Copy)]
enum Kept {
    /// A stored message.
    Stored(i64),
    /// A result of the running turn, not stored until the turn commits: a negative handle
    /// that [`TurnSpill::page`] serves from memory until then.
    ThisTurn(i64),
}

/// The preview text for a tool result over `spill_chars`, or `None` when it fits.
pub fn spilled_wire(
    session_id: &str,
    id: i64,
    role: Role,
    wire: &str,
    spill_chars: usize,
) -> Option<String> {
    if role != Role::Tool {
        return None;
    }
    preview(session_id, Kept::Stored(id), wire, spill_chars)
}

fn preview(session_id: &str, kept: Kept, wire: &str, spill_chars: usize) -> Option<String> {
    if spill_chars == 0 {
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
    let (kept, id) = match kept {
        Kept::Stored(id) => (format!("message #{id}"), id),
        Kept::ThisTurn(h) => (
            format!("result {h} of this turn (stored as a message when the turn ends)"),
            h,
        ),
    };
    Some(format!(
        "[Large tool result: {total} characters, kept whole as {kept}. Shown: the first \
         {head_n} and the last {tail_n} characters. To read the rest, call session_search with \
         session_id=\"{session_id}\", around_message_id={id}, offset=0 (then the next_offset it \
         returns); each call returns {PAGE_CHARS} characters.]\n{head}\n[… {} characters not \
         shown …]\n{tail}",
        total - head_n - tail_n
    ))
}

/// The running turn's own large tool results. They reach the store only when the turn
/// commits, so the next request of the same turn shows a preview naming a turn-local handle
/// (`around_message_id=-1`, `-2`, …), and `session_search` calls for those handles are
/// answered here from memory. Handles are given in the order results arrive, so replaying a
/// committed turn's messages through a new `TurnSpill` reproduces the bytes that were sent.
pub struct TurnSpill<'a> {
    session_id: &'a str,
    spill_chars: usize,
    held: Vec<String>,
}

/// What tells a page apart from the other `session_search` answers.
#[derive(serde::Deserialize)]
struct PageShape {
    #[allow(dead_code)]
    total_chars: usize,
}

#[derive(serde::Deserialize)]
struct PageArgs {
    session_id: Option<String>,
    around_message_id: Option<i64>,
    offset: Option<usize>,
}

impl<'a> TurnSpill<'a> {
    pub fn new(session_id: &'a str, spill_chars: usize) -> TurnSpill<'a> {
        TurnSpill {
            session_id,
            spill_chars,
            held: Vec::new(),
        }
    }

    /// What the model sees of the result of `tool`. A page of a long message is shown whole:
    /// it is bounded by [`PAGE_CHARS`], and previewing it would leave the rest unreachable.
    pub fn wire(&mut self, tool: Option<&str>, result: &str) -> String {
        if tool == Some(SEARCH_TOOL) && serde_json::from_str::<PageShape>(result).is_ok() {
            return result.to_string();
        }
        let handle = -(self.held.len() as i64) - 1;
        match preview(
            self.session_id,
            Kept::ThisTurn(handle),
            result,
            self.spill_chars,
        ) {
            Some(p) => {
                self.held.push(result.to_string());
                p
            }
            None => result.to_string(),
        }
    }

    /// `text` as the model sees it under its own limit of `limit` characters (a child agent's
    /// summary past its share of the context): whole when it fits, else a preview under a
    /// handle of this turn that pages the rest.
    pub fn hold(&mut self, text: &str, limit: usize) -> String {
        let handle = -(self.held.len() as i64) - 1;
        match preview(self.session_id, Kept::ThisTurn(handle), text, limit.max(1)) {
            Some(p) => {
                self.held.push(text.to_string());
                p
            }
            None => text.to_string(),
        }
    }

    /// The answer to a `session_search` call aimed at a handle of this turn (a page from
    /// `offset`, 0 when absent); `None` for any other call, which goes to the tools.
    pub fn page(&self, tool: &str, arguments: &str) -> Option<String> {
        if tool != SEARCH_TOOL {
            return None;
        }
        let args: PageArgs = serde_json::from_str(arguments).ok()?;
        let (Some(sid), Some(handle)) = (args.session_id, args.around_message_id) else {
            return None;
        };
        if handle >= 0 || sid != self.session_id {
            return None;
        }
        let held = usize::try_from(-(handle + 1))
            .ok()
            .and_then(|i| self.held.get(i));
        Some(match held {
            Some(text) => page(&sid, text, handle, args.offset.unwrap_or(0)),
            None => format!("error: this turn has no result {handle}"),
        })
    }
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

    #[test]
    fn a_turns_results_are_previewed_under_handles_and_paged_from_memory() {
        let mut t = TurnSpill::new("s1", 8_000);
        let big = format!("{}end", "a".repeat(20_000));
        let other = "b".repeat(9_000);
        assert_eq!(t.wire(Some("shell"), "short"), "short");
        let p1 = t.wire(Some("shell"), &big);
        assert!(p1.starts_with("[Large tool result: 20003 characters, kept whole as result -1"));
        assert!(p1.contains("around_message_id=-1, offset=0") && p1.ends_with("end"));
        assert!(t.wire(None, &other).contains("around_message_id=-2"));

        let page = |t: &TurnSpill, args: &str| t.page("session_search", args);
        let first: serde_json::Value = serde_json::from_str(
            &page(
                &t,
                r#"{"session_id":"s1","around_message_id":-1,"offset":0}"#,
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(first["total_chars"], 20_003);
        assert_eq!(first["next_offset"], PAGE_CHARS);
        let last: serde_json::Value = serde_json::from_str(
            &page(
                &t,
                r#"{"session_id":"s1","around_message_id":-1,"offset":16000}"#,
            )
            .unwrap(),
        )
        .unwrap();
        assert!(last["content"].as_str().unwrap().ends_with("end"));
        assert!(last["next_offset"].is_null());
        // A page is shown whole, even over the threshold; other answers are not.
        let page_text = page(&t, r#"{"session_id":"s1","around_message_id":-2}"#).unwrap();
        assert!(page_text.chars().count() > 8_000);
        assert_eq!(t.wire(Some("session_search"), &page_text), page_text);
        let scroll = format!(r#"{{"messages":[{{"content":"{}"}}]}}"#, "c".repeat(9_000));
        assert!(t
            .wire(Some("session_search"), &scroll)
            .starts_with("[Large"));

        assert!(page(&t, r#"{"session_id":"s1","around_message_id":-9}"#)
            .unwrap()
            .starts_with("error: this turn has no result -9"));
        // Stored ids, other sessions and other tools are not this turn's to answer.
        assert_eq!(
            page(&t, r#"{"session_id":"s1","around_message_id":7}"#),
            None
        );
        assert_eq!(
            page(&t, r#"{"session_id":"s2","around_message_id":-1}"#),
            None
        );
        assert_eq!(
            t.page("shell", r#"{"session_id":"s1","around_message_id":-1}"#),
            None
        );
    }
}
