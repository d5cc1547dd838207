//! The synthetic agent transcript the context benchmark projects, shared with the compaction
//! corpus check so both look at the same windows.

use herald::agent::compaction::{estimate_tokens, ProjMessage};
use herald::domain::{Role, ToolCall};
use serde_json::json;

/// A synthetic agent transcript of about `tokens` tokens: requests, shell calls with exit
/// codes, file reads, errors, answers.
pub fn transcript(tokens: usize) -> Vec<ProjMessage> {
    let mut out = Vec::new();
    let (mut used, mut id, mut i) = (0usize, 1i64, 0usize);
    let mut push = |m: ProjMessage, used: &mut usize| {
        *used += estimate_tokens(&m.content) + 4;
        out.push(m);
    };
    while used < tokens {
        let msg = |id, role, content: String| ProjMessage {
            id,
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
        };
        push(
            msg(
                id,
                Role::User,
                format!("Please fix test {i} in src/mod{i}.rs; it fails on CI."),
            ),
            &mut used,
        );
        id += 1;
        let call = ToolCall {
            id: format!("c{i}"),
            name: "terminal".into(),
            arguments: json!({"command": format!("cargo test -p crate{} mod{i}", i % 7)})
                .to_string(),
        };
        let mut a = msg(id, Role::Assistant, String::new());
        a.tool_calls = vec![call];
        push(a, &mut used);
        id += 1;
        let mut body = format!(
            "running 12 tests\nerror[E0308]: mismatched types in src/mod{i}.rs:{}\n",
            i * 3
        );
        for k in 0..40 {
            body.push_str(&format!(
                "test mod{i}::case_{k} ... {}\n",
                if k % 9 == 0 { "FAILED" } else { "ok" }
            ));
        }
        body.push_str(if i % 3 == 0 {
            "exit code 0\n"
        } else {
            "exit code 101\n"
        });
        let mut t = msg(id, Role::Tool, body);
        t.tool_call_id = Some(format!("c{i}"));
        t.tool_name = Some("terminal".into());
        push(t, &mut used);
        id += 1;
        push(
            msg(
                id,
                Role::Assistant,
                format!("Fixed the type in src/mod{i}.rs; TypeError gone, tests pass."),
            ),
            &mut used,
        );
        id += 1;
        i += 1;
    }
    out
}
