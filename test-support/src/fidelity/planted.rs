//! Seeded agent transcripts with planted facts and their ground truth, for measuring what the
//! projector keeps (`bench_fidelity`, `tests/it/compaction_fidelity.rs`).
//!
//! The generator writes every fact itself and records it as it writes it: each command run
//! with its outcome, each path a file tool touched or a failed run's output named, each error
//! name and the message it first appears in. Filler text is chosen so it holds none of these
//! (no stray `exit`, no `.rs`-like tokens, no `…Error` words), so the truth is complete and a
//! projector that lists anything else has invented it.

use herald::agent::compaction::{estimate_tokens, one_line, ProjMessage};
use herald::domain::{Role, ToolCall};
use serde_json::json;

use crate::rng::Rng;

/// One run of a shell command: the command as the projection must print it (cleaned, as the
/// projector quotes every argument), the result's message id, the outcome in its printed form.
#[derive(Debug, Clone)]
pub struct Run {
    pub command: String,
    pub result_id: i64,
    pub outcome: String,
}

/// A path touched by a file tool (cited by the call's id) or named in a failed run's output
/// (cited by the result's id). A write whose arguments were cut by pruning is cited by its
/// result, whose stub is then the only message that still holds the path.
#[derive(Debug, Clone)]
pub struct Touch {
    pub path: String,
    pub action: &'static str,
    pub id: i64,
}

/// Everything planted, in the order it was written.
#[derive(Debug, Default)]
pub struct Truth {
    pub runs: Vec<Run>,
    pub touches: Vec<Touch>,
    /// Error names with the id of each tool or user message that contains them.
    pub names: Vec<(String, i64)>,
    /// Messages that carry hostile text.
    pub hostile: usize,
}

pub struct Planted {
    pub label: String,
    pub messages: Vec<ProjMessage>,
    pub truth: Truth,
}

use super::planted_words::*;

struct Gen {
    rng: Rng,
    id: i64,
    call: usize,
    /// Distinct-fact counter: makes paths, commands and names unique.
    n: usize,
    used: usize,
    messages: Vec<ProjMessage>,
    truth: Truth,
    /// Commands that failed and are waiting for a later, passing rerun.
    pending: Vec<(String, Family)>,
}

#[derive(Debug, Clone, Copy)]
enum Family {
    Rust,
    Python,
    Ts,
    Node,
    /// Fails with `error: …` and no exit code: "failed (error)".
    NoCode,
}

/// A transcript of about `tokens` tokens planted from `seed`.
pub fn planted(seed: u64, tokens: usize) -> Planted {
    // Every transcript is reproducible from its seed (never 0, which xorshift cannot leave).
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let first_id = 1_000 + rng.below(9_000) as i64;
    let mut g = Gen {
        rng,
        id: first_id,
        call: 0,
        n: 0,
        used: 0,
        messages: Vec::new(),
        truth: Truth::default(),
        pending: Vec::new(),
    };
    while g.used < tokens {
        g.episode();
    }
    Planted {
        label: format!("seed {seed}, {tokens} tokens"),
        messages: g.messages,
        truth: g.truth,
    }
}

impl Gen {
    fn push(&mut self, role: Role, content: String) -> i64 {
        // Store ids grow but are not contiguous (other sessions write in between).
        self.id += 1 + self.rng.below(3) as i64;
        self.used += estimate_tokens(&content) + 4;
        self.messages.push(ProjMessage {
            id: self.id,
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
        });
        self.id
    }

    /// An assistant message with one tool call and the tool's result; returns both ids.
    fn call(&mut self, tool: &str, args: serde_json::Value, output: String) -> (i64, i64) {
        self.call_raw(tool, args.to_string(), output)
    }

    /// [`Gen::call`] with arguments as stored, which need not be JSON (pruning cuts them).
    fn call_raw(&mut self, tool: &str, arguments: String, output: String) -> (i64, i64) {
        self.call += 1;
        let call_id = format!("call_{}", self.call);
        let call_msg = self.push(Role::Assistant, String::new());
        self.used += estimate_tokens(&arguments);
        let last = self.messages.last_mut().expect("just pushed");
        last.tool_calls.push(ToolCall {
            id: call_id.clone(),
            name: tool.into(),
            arguments,
        });
        let result = self.push(Role::Tool, output);
        let last = self.messages.last_mut().expect("just pushed");
        last.tool_call_id = Some(call_id);
        last.tool_name = Some(tool.into());
        (call_msg, result)
    }

    fn names_in(&mut self, names: &[String], id: i64) {
        for name in names {
            self.truth.names.push((name.clone(), id));
        }
    }

    fn episode(&mut self) {
        self.n += 1;
        let n = self.n;
        let request = if self.rng.below(12) == 0 {
            self.truth.hostile += 1;
            HOSTILE_REQUEST.to_string()
        } else {
            format!("Next: make the service handle shard {n} and keep the suite green.")
        };
        self.push(Role::User, request);
        if self.rng.below(6) == 0 {
            // A pasted error: user messages are scanned for error names too.
            let name = format!("Shard{n}UnavailableError");
            let id = self.push(Role::User, format!("CI says: {name} on shard {n}"));
            self.names_in(&[name], id);
        }
        match self.rng.below(12) {
            0 | 1 => {
                let family = self.family();
                let cmd = self.command_for(family, n);
                self.run_failing(&cmd, family);
                self.pending.push((cmd, family));
            }
            2 => {
                let family = self.family();
                let cmd = self.command_for(family, n);
                for _ in 0..1 + self.rng.below(2) {
                    self.run_failing(&cmd, family);
                }
            }
            3 => {
                let cmd = format!("git log --oneline -n {n}");
                let out = self.wrap(format!("a1b2c3{n} tidy shard {n}\nd4e5f6 start\n"), None);
                self.run(&cmd, out, "ran (no exit code)");
            }
            4 | 5 => {
                let cmd = self.rng.pick(RECURRING).to_string();
                if self.rng.below(3) == 0 {
                    let family = self.family();
                    self.run_failing(&cmd, family);
                } else {
                    self.run_ok(&cmd);
                }
            }
            6 | 7 => self.file_work(n),
            8 => self.hostile(),
            9 | 10 => match self.pending.pop() {
                Some((cmd, family)) => {
                    self.patch(&format!("src/fix/shard_{n}.rs"));
                    if self.rng.below(4) == 0 {
                        self.run_failing(&cmd, family);
                        self.pending.push((cmd, family));
                    } else {
                        self.run_ok(&cmd);
                    }
                }
                None => self.file_work(n),
            },
            _ => {
                self.push(
                    Role::Assistant,
                    format!("Shard {n} looks fine; moving on to the next request."),
                );
            }
        }
    }

    fn family(&mut self) -> Family {
        [
            Family::Rust,
            Family::Python,
            Family::Ts,
            Family::Node,
            Family::NoCode,
        ][self.rng.below(5)]
    }

    fn command_for(&self, family: Family, n: usize) -> String {
        match family {
            Family::Rust => format!("cargo test -p svc{n} --lib"),
            Family::Python => format!("pytest tests/test_shard{n}.py -q"),
            Family::Ts => format!("npx tsc -p packages/app{n}"),
            Family::Node => format!("node scripts/migrate{n}.js"),
            Family::NoCode => format!("make deploy-{n}"),
        }
    }

    fn run(&mut self, command: &str, output: String, outcome: &str) -> i64 {
        let (_, result) = self.call("terminal", json!({ "command": command }), output);
        self.truth.runs.push(Run {
            command: one_line(command),
            result_id: result,
            outcome: outcome.to_string(),
        });
        result
    }

    fn run_ok(&mut self, command: &str) {
        let out = "running 12 tests\ntest result: ok. 12 passed; 0 failed\n";
        let out = self.wrap(out.to_string(), Some(0));
        self.run(command, out, "ok (exit 0)");
    }

    /// A failing run whose output names a fresh path and one or two error names.
    fn run_failing(&mut self, command: &str, family: Family) {
        self.n += 1;
        let n = self.n;
        let r = self.rng.below(1_000);
        let (path, names, output, code): (String, Vec<String>, String, Option<i32>) = match family {
            Family::Rust => {
                let code = RUST_CODES[r % RUST_CODES.len()];
                let path = format!("src/shard{n}/loader.rs");
                let out = format!(
                    "   Compiling svc v0.1.0\nerror[{code}]: borrow of moved value: `cfg`\n  \
                     --> {path}:{}:5\nerror: could not compile `svc` due to 1 previous error\n",
                    r % 90 + 1
                );
                (path, vec![code.into()], out, Some(101))
            }
            Family::Python => {
                let name = PY_NAMES[r % PY_NAMES.len()];
                let path = format!("app/handlers/shard{n}.py");
                let line = r % 70 + 1;
                // The traceback, then pytest's short `path:line:` form at the start of a line.
                // The name is coloured, as pytest prints it on a terminal; a JSON-wrapped result
                // spells the escapes as six characters each (`\u001b[31mValueError\u001b[0m`).
                let out = format!(
                    "Traceback (most recent call last):\n  File \"{path}\", line {line}, in handle\n\
                     \u{1b}[31m{name}\u{1b}[0m: shard {n} is not ready\n{path}:{line}: in handle\n\
                     1 failed, 4 passed\n"
                );
                (path, vec![name.into()], out, Some(1))
            }
            Family::Ts => {
                let code = TS_CODES[r % TS_CODES.len()];
                let path = format!("packages/app{n}/src/view.ts");
                let out = format!(
                    "{path}(4,10): error {code}: Cannot find name 'shardClient'\n\
                     Found 1 error\n"
                );
                (path, vec![code.into()], out, Some(2))
            }
            Family::Node => {
                let errno = ERRNO[r % ERRNO.len()];
                let java = JAVA_NAMES[r % JAVA_NAMES.len()];
                let path = format!("lib/db/pool{n}.js");
                let out = format!(
                    "Error: connect {errno} 127.0.0.1:5432\n    at connect ({path}:88:13)\n\
                     caused by {java} in the bridge\n"
                );
                (path, vec![errno.into(), java.into()], out, Some(1))
            }
            Family::NoCode => {
                let name = format!("Shard{n}UnavailableError");
                let path = format!("deploy/shard{n}.yaml");
                let out = format!("error: {name} while applying {path}\nrollout stopped\n");
                (path, vec![name], out, None)
            }
        };
        let outcome = match code {
            Some(c) => format!("failed (exit {c})"),
            None => "failed (error)".to_string(),
        };
        let output = self.wrap(output, code);
        let result = self.run(command, output, &outcome);
        self.names_in(&names, result);
        self.truth.touches.push(Touch {
            path,
            action: "mentioned in an error",
            id: result,
        });
    }

    /// A terminal result in one of the shapes tools record: plain output followed by an exit
    /// line in one of several spellings, or a JSON object (`output`, `exit_code`, `error`) whose
    /// output is escaped onto one line. `code` is `None` for a run that states no exit code.
    fn wrap(&mut self, body: String, code: Option<i32>) -> String {
        let failed = body.starts_with("error");
        match (self.rng.below(5), code) {
            (0, _) if failed => json!({ "output": "", "error": body }).to_string(),
            (0, Some(c)) => json!({ "output": body, "exit_code": c, "error": null }).to_string(),
            (0, None) => json!({ "output": body }).to_string(),
            (_, None) => body,
            (1, Some(c)) => format!("{body}[process exited with code {c}]\n"),
            (2, Some(c)) => format!("{body}Exit status: {c}\n"),
            (3, Some(c)) => format!("{body}returncode={c}\n"),
            (_, Some(c)) => format!("{body}exit code: {c}\n"),
        }
    }

    fn touch(&mut self, path: &str, action: &'static str, id: i64) {
        self.truth.touches.push(Touch {
            path: path.to_string(),
            action,
            id,
        });
    }

    fn patch(&mut self, path: &str) {
        let input = format!(
            "*** Begin Patch\n*** Update File: {path}\n@@\n-let x = 1;\n+let x = 2;\n*** End Patch"
        );
        let (id, _) = self.call("apply_patch", json!({ "input": input }), "Done!".into());
        self.touch(path, "modified", id);
    }

    /// Reads, edits and writes through the file tools' usual argument shapes.
    fn file_work(&mut self, n: usize) {
        let read = format!("src/shard{n}/mod.rs");
        let (id, _) = self.call(
            "read_file",
            json!({ "path": read }),
            "pub mod loader;\npub fn start() {}\n".into(),
        );
        self.touch(&read, "read", id);
        match self.rng.below(3) {
            0 => {
                let (id, _) = self.call(
                    "str_replace_editor",
                    json!({"command": "str_replace", "path": read, "old_str": "start", "new_str": "run"}),
                    "The file has been edited.".into(),
                );
                self.touch(&read, "modified", id);
            }
            1 if n.is_multiple_of(2) => {
                // Pruned as an agent harness prunes old turns: the long arguments cut to 200 characters
                // (no longer JSON), the result replaced by a one-line stub that keeps the path.
                let new = format!("docs/shard{n}.md");
                let content: String = (1..=32)
                    .map(|k| format!("Shard {n} notes, line {k}\n"))
                    .collect();
                let args = json!({ "path": new, "content": content }).to_string();
                let (_, id) = self.call_raw(
                    "write_file",
                    format!("{}...[truncated]", &args[..200]),
                    format!("[write_file] wrote to {new} (32 lines)"),
                );
                self.touch(&new, "written", id);
            }
            1 => {
                let new = format!("docs/shard{n}.md");
                let (id, _) = self.call(
                    "write_file",
                    json!({ "path": new, "content": "Shard notes\n" }),
                    "Wrote 12 bytes".into(),
                );
                self.touch(&new, "written", id);
            }
            _ => {
                let (upd, add) = (
                    format!("src/shard{n}/loader.rs"),
                    format!("src/shard{n}/retry.rs"),
                );
                let input = format!(
                    "*** Begin Patch\n*** Update File: {upd}\n@@\n-a\n+b\n*** Add File: {add}\n+pub fn retry() {{}}\n*** End Patch"
                );
                let (id, _) = self.call("apply_patch", json!({ "input": input }), "Done!".into());
                self.touch(&upd, "modified", id);
                self.touch(&add, "written", id);
            }
        }
    }

    /// Hostile tool output from an otherwise passing command, or a command that is hostile.
    fn hostile(&mut self) {
        self.truth.hostile += 1;
        if self.rng.below(3) == 0 {
            let cmd = self.rng.pick(HOSTILE_COMMANDS).to_string();
            self.run(&cmd, "done\n".into(), "ran (no exit code)");
        } else {
            let cmd = format!("cat logs/build{}.log", self.n);
            self.run(&cmd, HOSTILE_OUTPUT.into(), "ok (exit 0)");
        }
    }
}
