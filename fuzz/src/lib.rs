//! Helpers shared by the fuzz targets: the invariants `tests/fuzz_props.rs` checks, restated
//! for raw fuzzer bytes. It must stay a checker — no herald behaviour is reimplemented here
//! beyond what an invariant needs to state.

use herald::agent::compaction::ProjMessage;
use herald::domain::{Role, ToolCall};
use herald::handoff::trim_marker;
use libfuzzer_sys::arbitrary::{Result, Unstructured};

/// The characters a clean lane key may hold.
pub fn is_lane_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

/// True when `out` is a bare head cut of `text`, or head + trim marker + tail with the head a
/// prefix, the tail a suffix and the marker counting exactly the characters between them.
pub fn middle_cut_of(text: &str, out: &str) -> bool {
    if text.starts_with(out) {
        return true;
    }
    let total = text.chars().count();
    out.match_indices("\n\n[… ").any(|(i, _)| {
        let head = &out[..i];
        let digits: String = out[i + "\n\n[… ".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let Ok(removed) = digits.parse::<usize>() else {
            return false;
        };
        let marker = trim_marker(removed);
        let Some(tail) = out[i..].strip_prefix(marker.as_str()) else {
            return false;
        };
        text.starts_with(head)
            && text.ends_with(tail)
            && head.chars().count() + removed + tail.chars().count() == total
    })
}

/// A transcript for the projector: roles, tool calls and tool results drawn from the bytes.
pub fn proj_messages(u: &mut Unstructured<'_>) -> Result<Vec<ProjMessage>> {
    let roles = [Role::User, Role::Assistant, Role::Tool, Role::System];
    let tools = ["terminal", "read_file", "write_file", "patch"];
    let n = u.int_in_range(0..=24)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let calls = u.int_in_range(0..=2)?;
        let mut tool_calls = Vec::new();
        for _ in 0..calls {
            tool_calls.push(ToolCall {
                id: "call_1".into(),
                name: u.arbitrary()?,
                arguments: u.arbitrary()?,
            });
        }
        out.push(ProjMessage {
            id: u.int_in_range(0..=10_000)?,
            role: *u.choose(&roles)?,
            content: u.arbitrary()?,
            tool_calls,
            tool_call_id: u.arbitrary::<bool>()?.then(|| "call_1".to_string()),
            tool_name: if u.arbitrary()? {
                Some(u.choose(&tools)?.to_string())
            } else {
                None
            },
        });
    }
    Ok(out)
}
