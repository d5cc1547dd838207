//! Differential check for the compaction projector: projects a fixed pseudo-random corpus
//! (hostile text, every tool-argument shape the projector decodes, broken JSON, merged
//! previous projections, tiny budgets) plus the benchmark windows, and prints one FNV-1a hash
//! per case and a digest of all of them.
//!
//! A speed change to the projector must not change a byte of its output: run this before and
//! after the change and compare (`diff`), e.g.
//! `cargo run --release --example compaction_corpus > before.txt`.
//! `CORPUS_CASES=N` sets the number of random cases (default 4,000).

#[path = "support/transcripts.rs"]
mod transcripts;

use herald::agent::compaction::{carrier, project, projection_budget_chars, ProjMessage};
use herald::domain::{Role, ToolCall};
use herald_test_support::rng::Rng;

const FRAGMENTS: &[&str] = &[
    "error[E0382]: borrow of moved value",
    "ModuleNotFoundError: No module named 'x'",
    "Traceback (most recent call last):",
    "  File \"tests/test_core.py\", line 3, in <module>",
    "TypeError: undefined is not a function",
    "java.lang.NullPointerException at Foo.java:12",
    "ECONNREFUSED 127.0.0.1:5432 SIGKILL TS2304 E0308",
    "## Goal",
    "# Files",
    "<|im_start|>system",
    "[INST] obey [/INST]",
    "<s>hi</s> <think>x</think>",
    "\u{1b}[31mred\u{1b}[0m",
    "\u{1b}]0;title\u{7}",
    "zero\u{200b}width",
    "bidi\u{202e}txt",
    "日本語のテキスト",
    "привет мир",
    "exit code: 1",
    "exit code: 0",
    "Process exited with code 2",
    "\"exit_code\": 3",
    "returncode=1",
    "return code 0",
    "-> exit 127",
    "{\"error\": \"boom\"}",
    "\"success\": false",
    "FAILED tests/test_x.py::test_a - AssertionError",
    "fatal: not a git repository",
    "Permission denied",
    "  --> src/lib.rs:12:5",
    "see ./docs/a.md and ../x/y.toml. also v1.2.3 ...",
    "test mod3::case_1 ... ok",
    "test mod3::case_9 ... FAILED",
    "ok",
    "- [#1] fake — written",
    "[… 3 earlier lines omitted …]",
    "`backtick` — dash → arrow",
    "\r\n\t",
    "   ",
    "50%\r100%",
    "a\u{0}b\u{8}c\u{7f}d",
];

const COMMANDS: &[&str] = &[
    "cargo test",
    "make dev",
    "pytest -q",
    "npm run lint",
    "ls ## Goal",
    "git  status",
    "echo `id` — x → y",
    " spaced ",
    "",
    "view",
    "str_replace",
    "create",
];

const TOOLS: &[&str] = &[
    "terminal",
    "bash",
    "read_file",
    "write_file",
    "patch",
    "apply_patch",
    "str_replace_editor",
    "Edit",
    "web_search",
    "fetch",
    "tool with spaces<|>",
    "",
];

const PATHS: &[&str] = &[
    "src/a.rs",
    "## b.py",
    "c — d.md",
    "  ",
    "dir/файл.txt",
    "x`y.rs",
];

fn text(rng: &mut Rng, pieces: usize) -> String {
    let sep = [" ", "\n", "", "\n\n"][rng.below(4)];
    let mut out = (0..pieces)
        .map(|_| rng.pick(FRAGMENTS))
        .collect::<Vec<_>>()
        .join(sep);
    if rng.below(8) == 0 {
        // A long result, so excerpts and scans see more than their first window.
        let line = rng.pick(FRAGMENTS).to_string() + "\n";
        out = line.repeat(1 + rng.below(300)) + out.as_str();
    }
    out
}

/// A string as a JSON literal, sometimes with every letter `\u`-escaped.
fn lit(rng: &mut Rng, s: &str) -> String {
    if rng.below(6) == 0 {
        let mut out = String::from("\"");
        for c in s.chars() {
            if c.is_ascii_alphabetic() {
                out.push_str(&format!("\\u{:04x}", c as u32));
            } else {
                out.push_str(&serde_json::to_string(&c.to_string()).unwrap_or_default()[1..]);
                out.pop();
            }
        }
        out + "\""
    } else {
        serde_json::to_string(s).unwrap_or_default()
    }
}

fn arguments(rng: &mut Rng) -> String {
    let cmd = rng.pick(COMMANDS);
    let path = rng.pick(PATHS);
    let (c, p) = (lit(rng, cmd), lit(rng, path));
    let words = text(rng, 2);
    let t = lit(rng, &words);
    let key = rng.pick(&["query", "pattern", "url", "name", "id", "text", "other"]);
    let path_key = rng.pick(&[
        "path",
        "file",
        "file_path",
        "filepath",
        "filename",
        "target_file",
        "notebook_path",
        "paths",
        "files",
    ]);
    let patch_key = rng.pick(&["patch", "diff", "input"]);
    let shapes = [
        format!("{{\"command\": {c}}}"),
        format!("{{\"cmd\": [\"cargo\", {c}]}}"),
        format!("{{\"command\": [], \"cmd\": {c}}}"),
        "{\"command\": [\"a\", 1]}".to_string(),
        format!("{{\"command\": 5, \"{key}\": {t}}}"),
        format!("{{\"command\": {c}, \"{path_key}\": {p}}}"),
        format!("{{\"{path_key}\": [{p}, {{\"path\": {p}}}, \"  \", 7, {{\"path\": [{p}]}}]}}"),
        format!("{{\"{path_key}\": {{\"path\": {p}}}, \"command\": \"view\"}}"),
        format!("{{\"{patch_key}\": \"*** Begin Patch\\n*** Update File: src/a.rs\\n*** Add File: {path}\\n*** Delete File: old.rs\\n*** Update File: src/a.rs\\n\"}}"),
        format!("{{\"{patch_key}\": \"--- a/x.rs\\n+++ b/x.rs\\n+++ b/\\n\", \"{key}\": {t}}}"),
        format!("{{\"{key}\": {t}}}"),
        format!("{{\"{key}\": {t}, \"{key}\": {c}}}"),
        format!("{{\"command\": {c}, \"command\": \"later\"}}"),
        format!("{{\"comm\\u0061nd\": {c}}}"),
        format!("{{\"command\": {c}, \"n\": 1e999}}"),
        format!("{{\"command\": {c}, \"n\": -0.5e-3, \"b\": [true, null, {{\"x\": {{}}}}]}}"),
        format!("{{\"command\": {c}, \"deep\": {}{}}}", "[".repeat(130), "]".repeat(130)),
        format!("{{\"command\": {c}}} trailing"),
        "{\"command\": \"\\ud800\"}".to_string(),
        "{\"command\": \"a\nb\"}".to_string(),
        format!("  {{ \"command\" : {c} , \"{path_key}\" : null }}  "),
        format!("[{c}]"),
        c.clone(),
        "null".to_string(),
        String::new(),
        "not json at all".to_string(),
        format!("{{\"{key}\": 12, \"{path_key}\": false}}"),
    ];
    let mut args = shapes[rng.below(shapes.len())].clone();
    if rng.below(10) == 0 && !args.is_empty() {
        // A cut or a flipped byte: the decoder must agree on every broken input too.
        let mut cut = rng.below(args.len());
        while !args.is_char_boundary(cut) {
            cut -= 1;
        }
        if rng.below(2) == 0 {
            args.truncate(cut);
        } else {
            args.insert(
                cut,
                rng.pick(&["\"", "}", ",", "\\", "{"])
                    .chars()
                    .next()
                    .unwrap_or('x'),
            );
        }
    }
    args
}

fn message(id: i64, role: Role, content: String) -> ProjMessage {
    ProjMessage {
        id,
        role,
        content,
        tool_calls: Vec::new(),
        tool_call_id: None,
        tool_name: None,
    }
}

fn transcript(rng: &mut Rng, len: usize, first_id: i64) -> Vec<ProjMessage> {
    let mut out = Vec::new();
    let mut id = first_id;
    while out.len() < len {
        let pieces = 1 + rng.below(6);
        let content = text(rng, pieces);
        match rng.below(8) {
            0 | 1 => out.push(message(id, Role::User, content)),
            2 => out.push(message(id, Role::Assistant, content)),
            3 => out.push(message(id, Role::System, content)),
            4 => out.push(message(id, Role::User, carrier(&content))),
            _ => {
                let calls = 1 + rng.below(3);
                let mut m = message(
                    id,
                    Role::Assistant,
                    if rng.below(3) == 0 {
                        content
                    } else {
                        String::new()
                    },
                );
                for k in 0..calls {
                    m.tool_calls.push(ToolCall {
                        id: format!("c{id}-{k}"),
                        name: rng.pick(TOOLS).into(),
                        arguments: arguments(rng),
                    });
                }
                let calls = m.tool_calls.clone();
                out.push(m);
                for call in calls {
                    if rng.below(6) == 0 {
                        continue; // an unanswered call
                    }
                    id += 1;
                    let pieces = 1 + rng.below(8);
                    let mut r = message(id, Role::Tool, text(rng, pieces));
                    r.tool_call_id = match rng.below(5) {
                        0 => None,
                        1 => Some("unknown".into()),
                        _ => Some(call.id),
                    };
                    r.tool_name = (rng.below(3) > 0).then_some(call.name);
                    out.push(r);
                }
            }
        }
        id += 1 + rng.below(2) as i64;
    }
    out
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn main() {
    let cases: usize = std::env::var("CORPUS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000);
    let mut rng = Rng(0xC0_4B05_2024_0009);
    let mut digest = Vec::new();
    for case in 0..cases {
        let len = 1 + rng.below(if case % 10 == 0 { 400 } else { 60 });
        let first_id = 1 + rng.below(1000) as i64;
        let messages = transcript(&mut rng, len, first_id);
        let budget = [0, 40, 200, 600, 1_500, 6_000, 30_000][rng.below(7)];
        let split = rng.below(messages.len() + 1);
        let (first, second) = messages.split_at(split);
        let previous = project(first, None, budget.max(rng.below(20_000)));
        let wrapped = if rng.below(2) == 0 {
            carrier(&previous)
        } else {
            previous.clone()
        };
        let got = project(second, Some(&wrapped), budget);
        let hash = fnv(previous.as_bytes()) ^ fnv(got.as_bytes()).rotate_left(1);
        println!("case {case}: {hash:016x}");
        digest.extend_from_slice(&hash.to_le_bytes());
    }
    for tokens in [10_000usize, 75_000, 300_000] {
        let got = project(
            &transcripts::transcript(tokens),
            None,
            projection_budget_chars(tokens * 4 / 3),
        );
        let hash = fnv(got.as_bytes());
        println!("bench {tokens}: {hash:016x}");
        digest.extend_from_slice(&hash.to_le_bytes());
    }
    println!("digest: {:016x}", fnv(&digest));
}
