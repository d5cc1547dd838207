//! Table tests for the fixed rules: exit codes, error names, paths, call decoding, the head /
//! middle / tail split, and the merge parser's round trip.

use crate::domain::{Role, ToolCall};

use super::budget::select_middle;
use super::extract::{
    call_facts, exit_code, pruned_write_path, result_outcome, FileAction, Outcome,
};
use super::scan::{error_names, mentioned_paths};
use super::ProjMessage;

#[test]
fn exit_codes_are_read_from_the_forms_tools_write() {
    let table: &[(&str, Option<i32>)] = &[
        ("exit code: 1", Some(1)),
        ("Exit Code 0", Some(0)),
        ("{\"output\": \"..\", \"exit_code\": 2}", Some(2)),
        (
            "process didn't exit successfully (exit status: 101)",
            Some(101),
        ),
        ("Process exited with code 3", Some(3)),
        (
            "[terminal] ran `pytest -q` -> exit 1, 40 lines output",
            Some(1),
        ),
        ("CompletedProcess(args='x', returncode=1)", Some(1)),
        ("exit code: 0\nlater: exit code: 7", Some(7)),
        ("exit -1", Some(-1)),
        ("sys.exit(1) was called", None),
        ("please exit the program", None),
        ("nonexit 4", None),
        ("exit1", None),
        ("exit code 12345678", None),
        ("48 passed in 1.2s", None),
        ("RETURN_CODE=6", Some(6)),
        ("Return Code: 7 then EXIT 8", Some(8)),
        // Keywords found from a rare letter must not slice inside a wider character.
        ("ǅǅu exit 4", Some(4)),
        ("İreturn code 5", Some(5)),
    ];
    for (text, want) in table {
        assert_eq!(exit_code(text), *want, "text {text:?}");
    }
}

#[test]
fn outcomes_never_invent_success() {
    let table: &[(&str, bool, Outcome)] = &[
        ("exit code: 0", true, Outcome::Ok(Some(0))),
        ("exit code: 2", true, Outcome::Failed(Some(2))),
        ("built ok", true, Outcome::Ran),
        ("built ok", false, Outcome::Ok(None)),
        ("Error: file not found", false, Outcome::Failed(None)),
        (
            "Traceback (most recent call last):\n  File",
            true,
            Outcome::Failed(None),
        ),
        ("{\"error\": \"denied\"}", false, Outcome::Failed(None)),
        (
            "{\"error\": null, \"exit_code\": 0}",
            true,
            Outcome::Ok(Some(0)),
        ),
    ];
    for (text, is_command, want) in table {
        assert_eq!(result_outcome(text, *is_command), *want, "text {text:?}");
        let mut described = String::new();
        want.describe_into(&mut described);
        assert_eq!(Outcome::parse(&described), Some(*want));
    }
}

#[test]
fn error_names_table() {
    let text = "ModuleNotFoundError: no module\nerror[E0382]: borrow of moved value\n\
                connect ECONNREFUSED 127.0.0.1:5432 java.lang.NullPointerException TS2304 \
                Error Exception EOF ERROR E12345 SIGSEGV ModuleNotFoundError";
    assert_eq!(
        error_names(text),
        [
            "ModuleNotFoundError",
            "E0382",
            "ECONNREFUSED",
            "NullPointerException",
            "TS2304",
            "SIGSEGV"
        ]
    );
}

/// A terminal colour right before a name or path, raw or JSON-escaped, is not part of it:
/// `\u001b[31mTypeError` (the ESC spelled as six characters inside a JSON-wrapped result) names
/// `TypeError`. Brackets and letters without an escape stay one word.
#[test]
fn colour_codes_before_a_name_or_path_are_not_part_of_it() {
    let table: &[(&str, &[&str])] = &[
        (
            r#"{"output":"\u001b[31mTypeError\u001b[0m: x is undefined"}"#,
            &["TypeError"],
        ),
        (
            r#"{"output":"\u001B[1;31mKeyError\u001B[0m"}"#,
            &["KeyError"],
        ),
        (r#"{"error":"\u009b31mValueError"}"#, &["ValueError"]),
        ("\u{1b}[31mTypeError\u{1b}[0m: x", &["TypeError"]),
        (
            "\u{1b}[mE0382 \u{9b}1mECONNREFUSED",
            &["E0382", "ECONNREFUSED"],
        ),
        (
            "\u{1b}[38;5;196mNullPointerException",
            &["NullPointerException"],
        ),
        // An escaped backslash: the six characters are text, not an escape.
        (r#"{"output":"\\u001b[31mTypeError"}"#, &[]),
        ("[31mTypeError x[0mKeyError u001b[31mValueError", &[]),
    ];
    for (text, want) in table {
        assert_eq!(error_names(text), *want, "text {text:?}");
    }
    assert_eq!(
        mentioned_paths(
            "\u{1b}[0m\u{1b}[1m\u{1b}[38;5;12m--> \u{1b}[0msrc/lib.rs:2:5 \u{1b}[1mapp/x.py\u{1b}[0m"
        ),
        ["src/lib.rs", "app/x.py"]
    );
    assert_eq!(
        mentioned_paths(r#"{"output":"\u001b[36mlib/db/pool.js\u001b[0m:88:13"}"#),
        ["lib/db/pool.js"]
    );
}

/// Only the whole stub of a pruned `write_file` result names its path.
#[test]
fn pruned_write_stubs_name_their_path() {
    let table: &[(&str, Option<&str>)] = &[
        (
            "[write_file] wrote to src/app.py (32 lines)",
            Some("src/app.py"),
        ),
        (
            "[write_file] wrote to /home/u/my notes (v2).md (1,204 lines)\n",
            Some("/home/u/my notes (v2).md"),
        ),
        (
            "[write_file] wrote to docs/a.md (3,400 chars)",
            Some("docs/a.md"),
        ),
        (
            "[write_file] wrote to docs/b.md (? lines)",
            Some("docs/b.md"),
        ),
        ("[write_file] wrote to ? (? lines)", None),
        ("[write_file] wrote to  (3 lines)", None),
        ("[write_file] wrote to a.md", None),
        ("[write_file] wrote to a.md (many lines)", None),
        ("[write_file] wrote to a.md (3 lines) and more", None),
        ("[write_file] wrote to a\nb.md (3 lines)", None),
        ("ok: [write_file] wrote to a.md (3 lines)", None),
        ("[read_file] read a.md from line 1 (30 chars)", None),
    ];
    for (text, want) in table {
        assert_eq!(pruned_write_path(text).as_deref(), *want, "text {text:?}");
    }
}

/// A `write_file` call whose arguments were cut by pruning (no longer JSON) still lists its
/// file, from its result's stub, cited there; a stub in another tool's output lists nothing.
#[test]
fn a_pruned_write_keeps_its_path() {
    let cut = format!(
        "{}...[truncated]",
        &r#"{"path": "src/report.py", "content": "import os\n"#
    );
    let mut write = msg(10, Role::Assistant, "");
    write.tool_calls.push(ToolCall {
        id: "w".into(),
        name: "write_file".into(),
        arguments: cut,
    });
    let mut echo = call(12, "e");
    echo.tool_calls[0].arguments = r#"{"command":"cat log"}"#.into();
    let messages = [
        write,
        result(11, "w", "[write_file] wrote to src/report.py (32 lines)"),
        echo,
        result(13, "e", "[write_file] wrote to /etc/passwd (1 lines)"),
    ];
    let got = super::project(&messages, None, 4_000);
    assert!(got.contains("- [#11] src/report.py — written\n"), "{got}");
    assert!(!got.contains("/etc/passwd —"), "{got}");
}

#[test]
fn mentioned_paths_keep_source_files_only() {
    let text = "  --> src/store/sqlite.rs:120:9\nFAILED tests/test_core.py::test_parse - \
                AssertionError\nsee https://example.com/a.js and version 1.2.3, e.g. core.py.";
    assert_eq!(
        mentioned_paths(text),
        ["src/store/sqlite.rs", "tests/test_core.py", "core.py"]
    );
}

#[test]
fn calls_are_decoded_into_commands_and_files() {
    let f = call_facts("terminal", r#"{"command":"cd ~/proj && pytest -q"}"#);
    assert_eq!(f.command.as_deref(), Some("cd ~/proj && pytest -q"));
    assert!(f.files.is_empty());

    let f = call_facts("bash", r#"{"cmd":["cargo","test","--lib"]}"#);
    assert_eq!(f.command.as_deref(), Some("cargo test --lib"));

    let f = call_facts(
        "str_replace_based_edit_tool",
        r#"{"command":"view","path":"/a/b.rs"}"#,
    );
    assert_eq!(f.command, None);
    assert_eq!(f.files, [("/a/b.rs".into(), FileAction::Read)]);

    let f = call_facts(
        "str_replace_based_edit_tool",
        r#"{"command":"str_replace","path":"/a/b.rs"}"#,
    );
    assert_eq!(f.files, [("/a/b.rs".into(), FileAction::Modified)]);

    let f = call_facts("write_file", r#"{"file_path":"notes.md","content":"x"}"#);
    assert_eq!(f.files, [("notes.md".into(), FileAction::Written)]);

    let f = call_facts(
        "apply_patch",
        r#"{"input":"*** Begin Patch\n*** Update File: src/a.rs\n*** Add File: src/b.rs\n*** End Patch"}"#,
    );
    assert_eq!(
        f.files,
        [
            ("src/a.rs".into(), FileAction::Modified),
            ("src/b.rs".into(), FileAction::Written)
        ]
    );

    let f = call_facts("web_search", r#"{"query":"tokio select cancel safety"}"#);
    assert_eq!(f.main_arg.as_deref(), Some("tokio select cancel safety"));

    let f = call_facts("terminal", "not json");
    assert!(f.command.is_none() && f.main_arg.is_none());
}

fn msg(id: i64, role: Role, content: &str) -> ProjMessage {
    ProjMessage {
        id,
        role,
        content: content.into(),
        tool_calls: vec![],
        tool_call_id: None,
        tool_name: None,
    }
}

fn call(id: i64, call_id: &str) -> ProjMessage {
    let mut m = msg(id, Role::Assistant, "");
    m.tool_calls.push(ToolCall {
        id: call_id.into(),
        name: "terminal".into(),
        arguments: r#"{"command":"ls"}"#.into(),
    });
    m
}

fn result(id: i64, call_id: &str, content: &str) -> ProjMessage {
    let mut m = msg(id, Role::Tool, content);
    m.tool_call_id = Some(call_id.into());
    m
}

#[test]
fn split_protects_head_pairs_and_the_latest_request() {
    let big = "word ".repeat(400); // ~500 tokens
    let messages = vec![
        msg(1, Role::System, "sys"),
        msg(2, Role::User, "first request"),
        call(3, "a"),
        result(4, "a", "ok"),
        msg(5, Role::User, &big),
        call(6, "b"),
        result(7, "b", &big),
        msg(8, Role::Assistant, &big),
        call(9, "c"),
        result(10, "c", "small"),
        msg(11, Role::Assistant, "done"),
    ];
    // Head: system, first user, the first reply and its result.
    // Tail budget 200 tokens fits 10 and 11 only; 10 is a tool result whose call (9) did not
    // fit, so the tail starts after it; the latest user request (index 4) pulls it back.
    let split = select_middle(&messages, 100_000, 200);
    assert_eq!(split.head, 0..4);
    assert_eq!(split.middle, 4..4);
    assert_eq!(split.tail, 4..11);

    let mut later = messages.clone();
    later.push(msg(12, Role::User, "latest"));
    later.push(call(13, "d"));
    later.push(result(14, "d", &big));
    let split = select_middle(&later, 100_000, 100);
    assert_eq!(
        split.tail,
        11..14,
        "latest user request kept even past the budget"
    );
    assert_eq!(split.middle, 4..11);

    // The walk stops at the first message that does not fit (8), even though older ones would.
    let split = select_middle(&later, 100_000, 600);
    assert_eq!(split.tail.start, 8);

    // Tiny windows cap the tail at half the window.
    let split = select_middle(&later, 40, 1_000_000);
    assert_eq!(split.tail, 11..14);

    assert_eq!(select_middle(&[], 1000, 100).middle, 0..0);
}

#[test]
fn rendered_entries_parse_back_unchanged() {
    use super::parse::parse_previous;
    use super::sections::*;

    let errors = vec![
        ErrorEntry {
            id: 5,
            key: "`make dev`".into(),
            outcome: Outcome::Failed(Some(2)),
            detail: Some("ModuleNotFoundError: No module named 'x' (see: docs)".into()),
            detail_from: None,
            fixed_at: Some(9),
        },
        ErrorEntry {
            id: 6,
            key: "read_file `a: b.rs`".into(),
            outcome: Outcome::Failed(None),
            detail: None,
            detail_from: None,
            fixed_at: None,
        },
    ];
    let files = vec![FileEntry {
        last_id: 7,
        path: "src/a - b.rs".into(),
        actions: vec![FileAction::Read, FileAction::Mentioned],
    }];
    let commands = vec![
        CommandEntry {
            last_id: 9,
            command: "make dev; echo 'at [#3]'".into(),
            last: Outcome::Ok(Some(0)),
            earlier_failure: Some((5, Outcome::Failed(Some(2)))),
            runs: 3,
        },
        CommandEntry {
            last_id: 10,
            command: "ls".into(),
            last: Outcome::Ran,
            earlier_failure: None,
            runs: 1,
        },
    ];
    let mut text =
        String::from("## Goal\n- [#1] first request: fix it: now\n## Errors and fixes\n");
    for e in &errors {
        text.push_str(&render_error(e));
        text.push('\n');
    }
    text.push_str("## Files\n[… 4 older entries omitted …]\n");
    text.push_str(&render_file(&files[0]));
    text.push_str("\n## Commands\n");
    for c in &commands {
        text.push_str(&render_command(c));
        text.push('\n');
    }
    text.push_str("## Error names\n- [#5] E0382\n## Session log\n[… 12 earlier lines omitted …]\n[#9] user: hi\n");

    let facts = parse_previous(&text);
    assert_eq!(
        facts.first_request,
        Some(GoalLine {
            id: 1,
            text: "fix it: now".into()
        })
    );
    assert_eq!(facts.errors, errors);
    assert_eq!(facts.files, files);
    assert_eq!(facts.commands, commands);
    assert_eq!(
        facts.names,
        [NameEntry {
            first_id: 5,
            name: "E0382"
        }]
    );
    assert_eq!(facts.log, ["[#9] user: hi"]);
    assert_eq!((facts.omitted.files, facts.omitted.log), (4, 12));
}
