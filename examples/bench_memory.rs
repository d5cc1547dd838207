//! Memory benchmark: what long-term memory costs a session start and a tool call, and what the
//! in-turn check costs between tool iterations. Prints median and max over the runs.
//!
//! - `snapshot`: reading both files of a person into prompt layers — empty, full to the caps,
//!   and a 1 MB hand-edited file (bounded read, screening, cap);
//! - `edit`: one `memory` add followed by its remove (lock, read, screen, atomic write twice);
//! - `in_turn`: one shrink of an in-flight request of 40 history rows and 12 tool groups.
//!
//! Run: `cargo run --release --example bench_memory` (`BENCH_RUNS=200` by default).

use std::time::{Duration, Instant};

use herald::agent::context::in_turn::{shrink, InTurnBudget};
use herald::agent::memory::{Edit, MemoryFiles, Target};
use herald::agent::turn::history_to_wire;
use herald::config::MemoryConfig;
use herald::domain::{Role, ToolCall};
use herald::llm::ChatMessage;
use herald::store::{NewMessage, StoredMessage};

fn stats(name: &str, mut xs: Vec<Duration>) {
    xs.sort();
    let med = xs[xs.len() / 2];
    let max = xs[xs.len() - 1];
    println!(
        "{name:<28} median {:>9.1} µs   max {:>9.1} µs",
        med.as_secs_f64() * 1e6,
        max.as_secs_f64() * 1e6
    );
}

fn time(runs: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().expect("temp dir");
    let files = MemoryFiles::new(dir.path(), &MemoryConfig::default());

    stats(
        "snapshot, no files",
        time(runs, || {
            std::hint::black_box(files.snapshot("nobody"));
        }),
    );
    for i in 0.. {
        let e = Edit::Add(format!(
            "fact number {i}: the deploy runs from the ops host"
        ));
        if files.edit("full", Target::Memory, &e).is_err() {
            break;
        }
    }
    for i in 0.. {
        let e = Edit::Add(format!("preference {i}: short answers, metric units"));
        if files.edit("full", Target::User, &e).is_err() {
            break;
        }
    }
    stats(
        "snapshot, full to the caps",
        time(runs, || {
            std::hint::black_box(files.snapshot("full"));
        }),
    );
    let big = dir.path().join("memory/huge/MEMORY.md");
    std::fs::create_dir_all(big.parent().unwrap()).unwrap();
    let mut text = String::new();
    while text.len() < 1 << 20 {
        text.push_str("- a hand-edited line that repeats\n\u{1}garbage\n");
    }
    std::fs::write(&big, text).unwrap();
    stats(
        "snapshot, 1 MB garbage file",
        time(runs, || {
            std::hint::black_box(files.snapshot("huge"));
        }),
    );
    stats(
        "edit: add + remove",
        time(runs, || {
            files
                .edit(
                    "writer",
                    Target::Memory,
                    &Edit::Add("a fact to keep".into()),
                )
                .unwrap();
            files
                .edit(
                    "writer",
                    Target::Memory,
                    &Edit::Remove {
                        old: "a fact to keep".into(),
                    },
                )
                .unwrap();
        }),
    );

    let history: Vec<StoredMessage> = (1..=40)
        .map(|i| {
            let role = if i % 2 == 1 {
                Role::User
            } else {
                Role::Assistant
            };
            let m = NewMessage::new(role, format!("message {i}: {}", "words ".repeat(300)));
            StoredMessage::committed(i, &"s".into(), &m, 0)
        })
        .collect();
    let mut wire = history_to_wire("SYSTEM PROMPT", &history, &Default::default());
    wire.push(ChatMessage::new(
        Role::User,
        "Check the blast radius first.",
    ));
    for n in 0..12 {
        wire.push(ChatMessage::tool_calls(
            None,
            vec![ToolCall {
                id: format!("c{n}"),
                name: "read_file".into(),
                arguments: r#"{"path":"src/main.rs"}"#.into(),
            }],
        ));
        wire.push(ChatMessage::tool_result(
            &format!("c{n}"),
            format!("line {n} ").repeat(1_500),
        ));
    }
    let budget = InTurnBudget {
        budget_tokens: 20_000,
        tail_tokens: 6_000,
        window: 32_000,
    };
    let mut last = None;
    stats(
        "in_turn shrink (40 + 12 groups)",
        time(runs, || {
            let mut w = wire.clone();
            last = shrink(&mut w, &history, &mut (history.len() + 1), &[], budget);
        }),
    );
    if let Some(s) = last {
        println!(
            "in_turn: {} → {} estimated tokens, {} results stubbed, {} history rows projected",
            s.before, s.after, s.stubbed, s.projected
        );
    }
}
