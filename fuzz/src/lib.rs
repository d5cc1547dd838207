//! Helpers shared by the fuzz targets: the invariant checks (herald-test-support's
//! `invariants`, which `tests/it/fuzz_props.rs` uses too, so each invariant is written once) and the shaping of raw
//! fuzzer bytes into structured inputs. No herald behaviour is reimplemented here.

use herald::agent::compaction::ProjMessage;
use herald::domain::{Role, ToolCall};
use libfuzzer_sys::arbitrary::{Result, Unstructured};

pub use herald_test_support::invariants;

/// Fails the fuzz run on a broken invariant: the panic is what libFuzzer records as a crash.
pub fn holds(verdict: invariants::Verdict) {
    if let Err(why) = verdict {
        panic!("invariant broken: {why}");
    }
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
