//! House rules of the source tree, checked on every `cargo test` (in the manner of
//! rust-analyzer's tidy tests): where SQL and platform crates may appear, what `domain` may
//! import or read (no I/O, no clock, no randomness), the direction of `use crate::` edges
//! between top-level modules, the `//!` header of every file, and where a task may be spawned
//! outside the app's tracker.
//!
//! The checks are plain text rules over `src/`, written as a function of (path, text) so that
//! the last tests can plant each kind of violation and see it reported. The whole file is read:
//! only items under `#[cfg(test)]` (found by matching their braces, strings and comments
//! skipped) and files declared as `#[cfg(test)] mod x;` follow the looser test rules.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Top-level modules in the order of the data path: a module may import only modules of a
/// lower rank. Same rank means no edge either way.
const RANKS: &[(&str, u8)] = &[
    ("domain", 0),
    // The platform registry, re-exported at the crate root from `adapters`: static facts every
    // layer reads (`config::registry`), not a step of the data path.
    ("PLATFORMS", 0),
    ("screen", 0),
    ("tasks", 0),
    ("net", 0),
    ("test_rng", 0),
    ("config", 1),
    ("events", 1),
    ("telemetry", 2),
    ("store", 2),
    ("reload", 2),
    ("llm", 2),
    ("media", 3),
    ("budget", 3),
    ("agent", 4),
    ("delivery", 4),
    ("hooks", 4),
    ("lanes", 5),
    ("cron", 6),
    ("handoff", 7),
    ("toolset", 7),
    ("webhooks", 7),
    ("adapters", 8),
    ("http", 8),
    ("cli", 9),
    ("app", 10),
    // Evals start whole apps on throwaway stores (`eval/`), above the app they drive.
    ("eval", 11),
];

/// Files allowed to spawn a task that is not on the app's tracker, and why.
const SPAWN_ALLOWED: &[(&str, &str)] = &[(
    "src/tasks.rs",
    "spawn_owned: the task is aborted when its owner drops, panicking or not",
)];

/// Single lines that break a rule on purpose: (file, text the line contains, rule, why).
/// Each entry names one line, so a second violation in the same file is still reported.
const LINE_ALLOWED: &[(&str, &str, &str, &str)] = &[
    (
        "src/media/document.rs",
        "tracker.spawn_blocking(",
        SPAWN_RULE,
        "on the app's TaskTracker: the text rule cannot tell it from task::spawn_blocking",
    ),
    (
        "src/media/cache.rs",
        "tokio::task::spawn_blocking(move ||",
        SPAWN_RULE,
        "one file's mtime set, awaited in place: std has the only set_modified",
    ),
];

const SPAWN_RULE: &str = "a loose spawn (put the task on the app's TaskTracker)";
const CLOCK_RULE: &str = "a clock or random read in src/domain (pass the time or id in)";

/// Ways to start a task or thread that no tracker sees. A method call on a tracker
/// (`tracker.spawn(…)`) is fine; a path call (`tokio::spawn`, `task::spawn_blocking`), a
/// `JoinSet` or a `use` that brings a bare `spawn` in is not.
const LOOSE_SPAWNS: &[&str] = &[
    "tokio::spawn(",
    "task::spawn(",
    "spawn_blocking(",
    "spawn_local(",
    "thread::spawn(",
    "thread::Builder",
    "thread::scope(",
    "JoinSet",
];

/// Reads of the wall clock, a monotonic clock or a random source.
const CLOCK_READS: &[&str] = &[
    "Utc::now(",
    "Local::now(",
    "SystemTime::now(",
    "Instant::now(",
    "OffsetDateTime::now",
    "Uuid::new_v4(",
    "Uuid::now_v7(",
    "rand::",
    "fastrand::",
    "getrandom",
    "thread_rng(",
];

fn rank(module: &str) -> Option<u8> {
    RANKS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
}

/// The top-level module a file under `src/` belongs to (`src/lanes/turn.rs` → `lanes`).
fn module_of(rel: &str) -> Option<&str> {
    let rest = rel.strip_prefix("src/")?;
    let first = rest.split('/').next()?;
    Some(first.strip_suffix(".rs").unwrap_or(first))
}

/// A line of code: its number, its text and whether it sits in an item under `#[cfg(test)]`.
struct Line<'a> {
    n: usize,
    text: &'a str,
    test: bool,
}

/// What `#[cfg(test)]` covers in a file: the line ranges of the items it is on, and the files
/// of `mod x;` declarations among them (relative paths, as `rust_files` names them).
struct TestItems {
    lines: Vec<(usize, usize)>,
    files: Vec<String>,
}

/// Marks each byte of `text` as code (true) or inside a comment, string or char literal
/// (false), so that braces and attributes are only counted where the compiler sees them.
fn code_mask(text: &str) -> Vec<bool> {
    let b = text.as_bytes();
    let mut mask = vec![true; b.len()];
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let start = i;
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i..].starts_with(b"/*") {
                        depth += 1;
                        i += 2;
                    } else if b[i..].starts_with(b"*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' if (i == 0 || !ident(b[i - 1]) || b[i - 1] == b'b') && {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                b.get(i + 1 + hashes) == Some(&b'"')
            } =>
            {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                i += hashes + 2;
                while i < b.len() && !b[i..].starts_with(&close) {
                    i += 1;
                }
                i = (i + close.len()).min(b.len());
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(b.len());
            }
            b'\'' => {
                // A char literal ('{', '\n', '\u{7d}') or a lifetime ('a): only the former
                // is masked.
                let len = text[i + 1..].chars().next().map_or(0, char::len_utf8);
                if b.get(i + 1) == Some(&b'\\') {
                    i += 3;
                    while i < b.len() && b[i] != b'\'' {
                        i += 1;
                    }
                    i = (i + 1).min(b.len());
                } else if b.get(i + 1 + len) == Some(&b'\'') {
                    i += len + 2;
                } else {
                    i += 1;
                    continue;
                }
            }
            _ => {
                i += 1;
                continue;
            }
        }
        mask[start..i.min(b.len())].fill(false);
    }
    mask
}

/// Finds every item under `#[cfg(test)]`: from the attribute to the `;` that ends it or the
/// `}` that closes its first `{`.
fn test_items(rel: &str, text: &str) -> TestItems {
    const ATTR: &str = "#[cfg(test)]";
    let mask = code_mask(text);
    let b = text.as_bytes();
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut items = TestItems {
        lines: Vec::new(),
        files: Vec::new(),
    };
    let mut from = 0;
    while let Some(found) = text[from..].find(ATTR) {
        let at = from + found;
        from = at + ATTR.len();
        if !mask[at] {
            continue;
        }
        let mut depth = 0usize;
        let mut end = b.len();
        let mut i = from;
        while i < b.len() {
            if mask[i] {
                match b[i] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            end = i + 1;
                            break;
                        }
                    }
                    b';' if depth == 0 => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        let item = &text[from..end];
        if item.trim_end().ends_with(';') {
            if let Some(file) = test_module_file(rel, item) {
                items.files.push(file);
            }
        }
        items
            .lines
            .push((line_of(at), line_of(end.saturating_sub(1))));
        from = end;
    }
    items
}

/// The file of a `mod x;` item (with an optional `#[path = "…"]`) declared in `rel`.
fn test_module_file(rel: &str, item: &str) -> Option<String> {
    let decl = item.split_whitespace().collect::<Vec<_>>().join(" ");
    let name = decl
        .rsplit_once("mod ")?
        .1
        .trim_end_matches(';')
        .trim()
        .to_string();
    let (dir, stem) = rel.rsplit_once('/')?;
    let stem = stem.strip_suffix(".rs")?;
    if let Some(path) = decl
        .split_once("#[path = \"")
        .and_then(|(_, p)| p.split_once('"'))
        .map(|(p, _)| p)
    {
        return Some(format!("{dir}/{path}"));
    }
    Some(if matches!(stem, "mod" | "lib" | "main") {
        format!("{dir}/{name}.rs")
    } else {
        format!("{dir}/{stem}/{name}.rs")
    })
}

/// The code of a file: every line but comment lines, each marked as test code or not.
fn code<'a>(rel: &str, text: &'a str) -> Vec<Line<'a>> {
    let tests = test_items(rel, text).lines;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .map(|(i, line)| Line {
            n: i + 1,
            text: line,
            test: tests.iter().any(|(a, z)| (*a..=*z).contains(&(i + 1))),
        })
        .collect()
}

fn words(line: &str, needle: &str) -> bool {
    line.match_indices(needle).any(|(i, _)| {
        i == 0 || !line.as_bytes()[i - 1].is_ascii_alphanumeric() && line.as_bytes()[i - 1] != b'_'
    })
}

/// Every rule broken by one file, as `path:line: what`.
pub fn check(rel: &str, text: &str) -> Vec<String> {
    check_file(rel, text, false)
}

/// The same, for a file that is itself a test module (`#[cfg(test)] mod x;` names it): all of
/// it is test code.
pub fn check_test_file(rel: &str, text: &str) -> Vec<String> {
    check_file(rel, text, true)
}

fn allowed(rel: &str, line: &str, rule: &str) -> bool {
    LINE_ALLOWED
        .iter()
        .any(|(f, frag, r, _)| *f == rel && *r == rule && line.contains(frag))
}

fn check_file(rel: &str, text: &str, test_file: bool) -> Vec<String> {
    let mut out = Vec::new();
    let Some(module) = module_of(rel) else {
        return out;
    };
    if !text.starts_with("//!") {
        out.push(format!(
            "{rel}:1: no //! header saying why the module exists"
        ));
    }
    let is_store = module == "store";
    let is_adapters = module == "adapters";
    let sql = [
        "SELECT ",
        "INSERT INTO ",
        "DELETE FROM ",
        "CREATE TABLE ",
        "UPDATE ",
    ];
    for Line {
        n,
        text: line,
        test,
    } in code(rel, text)
    {
        // Unit tests may spawn, read the clock and draw random numbers; every other rule
        // holds for them too.
        let production = !test && !test_file;
        if !is_store {
            if words(line, "sqlx::") {
                out.push(format!("{rel}:{n}: sqlx outside src/store"));
            }
            if line.contains('"') && sql.iter().any(|k| line.contains(&format!("\"{k}"))) {
                out.push(format!("{rel}:{n}: SQL outside src/store"));
            }
        }
        // The store is one mechanism: concerns are plain code over `Pools`, and sqlx's
        // generic machinery (its bounds) appears in `store/db.rs` alone.
        if is_store && !rel.ends_with("store/db.rs") {
            if line.contains("macro_rules!") {
                out.push(format!(
                    "{rel}:{n}: a macro in src/store (one impl over Pools)"
                ));
            }
            if ["Encode<", "Executor<", "IntoArguments<"]
                .iter()
                .any(|b| line.contains(b))
            {
                out.push(format!("{rel}:{n}: sqlx bounds outside src/store/db.rs"));
            }
            // SQLite marks a statement whose LIMIT is a bare parameter to be compiled again
            // whenever that parameter is bound, so sqlx's cached statement is re-prepared at
            // every run; a CAST keeps the plan independent of the value.
            if line.contains("LIMIT $") {
                out.push(format!(
                    "{rel}:{n}: a bare `LIMIT $n` (SQLite recompiles it at every run): write `LIMIT CAST($n AS BIGINT)`"
                ));
            }
        }
        if !is_adapters && (words(line, "teloxide::") || words(line, "serenity::")) {
            out.push(format!("{rel}:{n}: a platform crate outside src/adapters"));
        }
        if module == "domain" {
            for io in [
                "tokio::",
                "sqlx::",
                "reqwest::",
                "axum::",
                "std::fs",
                "std::net",
                "hyper::",
            ] {
                if words(line, io) {
                    out.push(format!("{rel}:{n}: {io} in src/domain (pure types only)"));
                }
            }
            if production
                && CLOCK_READS.iter().any(|c| words(line, c))
                && !allowed(rel, line, CLOCK_RULE)
            {
                out.push(format!("{rel}:{n}: {CLOCK_RULE}"));
            }
        }
        let bare_spawn_import =
            line.trim_start().starts_with("use ") || line.trim_start().starts_with("pub use ");
        let bare_spawn_import = bare_spawn_import
            && (line.contains("tokio::") || line.contains("std::thread"))
            && (line.contains("spawn,") || line.contains("spawn;") || line.contains("spawn}"));
        if production
            && (LOOSE_SPAWNS.iter().any(|s| words(line, s)) || bare_spawn_import)
            && !SPAWN_ALLOWED.iter().any(|(f, _)| *f == rel)
            && !allowed(rel, line, SPAWN_RULE)
        {
            out.push(format!("{rel}:{n}: {SPAWN_RULE}"));
        }
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            let target: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &after[target.len()..];
            if target == module || target.is_empty() {
                continue;
            }
            match (rank(module), rank(&target)) {
                (Some(from), Some(to)) if to < from => {}
                (Some(_), Some(_)) => {
                    out.push(format!(
                    "{rel}:{n}: `crate::{target}` from {module}: edges go down the data path ({})",
                    RANKS.iter().map(|(m, _)| *m).collect::<Vec<_>>().join(" < ")
                ))
                }
                (None, _) if module == "main" || module == "lib" => {}
                (None, _) => out.push(format!("{rel}:{n}: module {module} has no rank in tidy.rs")),
                (_, None) => out.push(format!("{rel}:{n}: module {target} has no rank in tidy.rs")),
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_source_tree_keeps_the_house_rules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let files: Vec<(String, String)> = files
        .iter()
        .map(|path| {
            let rel = path.strip_prefix(root).unwrap().to_string_lossy();
            (
                rel.replace('\\', "/"),
                std::fs::read_to_string(path).unwrap(),
            )
        })
        .collect();
    let test_files: HashSet<String> = files
        .iter()
        .flat_map(|(rel, text)| test_items(rel, text).files)
        .collect();
    let mut broken = Vec::new();
    for (rel, text) in &files {
        broken.extend(if test_files.contains(rel) {
            check_test_file(rel, text)
        } else {
            check(rel, text)
        });
    }
    let missing: Vec<_> = test_files
        .iter()
        .filter(|f| !files.iter().any(|(rel, _)| rel == *f))
        .collect();
    assert!(files.len() > 100, "only {} files found", files.len());
    assert!(
        missing.is_empty(),
        "test modules tidy could not place: {missing:?}"
    );
    assert!(
        broken.is_empty(),
        "house rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn each_rule_catches_a_planted_violation() {
    let cases = [
        (
            "src/http/x.rs",
            "//! h\nlet r = sqlx::query(\"x\");\n",
            "sqlx outside src/store",
        ),
        (
            "src/lanes/x.rs",
            "//! h\nlet q = \"SELECT id FROM inbox\";\n",
            "SQL outside src/store",
        ),
        (
            "src/store/x.rs",
            "//! h\nmacro_rules! inbox_impl { () => {}; }\n",
            "a macro in src/store",
        ),
        (
            "src/store/x.rs",
            "//! h\nfn f<DB>() where i64: for<'q> Encode<'q, DB> {}\n",
            "sqlx bounds outside src/store/db.rs",
        ),
        (
            "src/store/x.rs",
            "//! h\nlet q = \"SELECT id FROM inbox ORDER BY id LIMIT $2\";\n",
            "a bare `LIMIT $n`",
        ),
        (
            "src/lanes/x.rs",
            "//! h\nuse teloxide::Bot;\n",
            "platform crate outside src/adapters",
        ),
        (
            "src/domain/x.rs",
            "//! h\nuse tokio::sync::Mutex;\n",
            "tokio:: in src/domain",
        ),
        (
            "src/store/x.rs",
            "//! h\nuse crate::lanes::Ingest;\n",
            "`crate::lanes` from store",
        ),
        (
            "src/cron/x.rs",
            "// no header\nfn f() {}\n",
            "no //! header",
        ),
        (
            "src/app.rs",
            "//! h\nfn f() { tokio::spawn(async {}); }\n",
            "a loose spawn",
        ),
        (
            "src/newmod/x.rs",
            "//! h\nuse crate::domain::LaneKey;\n",
            "module newmod has no rank",
        ),
        (
            "src/http/x.rs",
            "//! h\nlet t = tokio::task::spawn(async {});\n",
            "a loose spawn",
        ),
        (
            "src/http/x.rs",
            "//! h\nlet t = tokio::task::spawn_blocking(|| 1);\n",
            "a loose spawn",
        ),
        (
            "src/cron/x.rs",
            "//! h\nlet mut set = tokio::task::JoinSet::new();\n",
            "a loose spawn",
        ),
        (
            "src/cron/x.rs",
            "//! h\nuse tokio::spawn;\n",
            "a loose spawn",
        ),
        (
            "src/agent/x.rs",
            "//! h\nstd::thread::spawn(|| ());\n",
            "a loose spawn",
        ),
        (
            "src/domain/x.rs",
            "//! h\nlet at = chrono::Utc::now();\n",
            "a clock or random read in src/domain",
        ),
        (
            "src/domain/x.rs",
            "//! h\nlet at = std::time::SystemTime::now();\n",
            "a clock or random read in src/domain",
        ),
        (
            "src/domain/x.rs",
            "//! h\nlet at = Instant::now();\n",
            "a clock or random read in src/domain",
        ),
        (
            "src/domain/x.rs",
            "//! h\nlet id = uuid::Uuid::new_v4();\n",
            "a clock or random read in src/domain",
        ),
        (
            "src/domain/x.rs",
            "//! h\nlet n: u8 = rand::random();\n",
            "a clock or random read in src/domain",
        ),
        // Past the tests: a `#[cfg(test)] mod x;` near the top (as in adapters/telegram) and a
        // test module whose strings and chars hold braces do not end the checked code.
        (
            "src/adapters/telegram/mod.rs",
            "//! h\n#[cfg(test)]\nmod inbound_tests;\nfn f() { tokio::spawn(async {}); }\n",
            "mod.rs:4: a loose spawn",
        ),
        (
            "src/app.rs",
            "//! h\n#[cfg(test)]\nmod tests {\n    const O: char = '{';\n    const S: &str = \"}}{\";\n    /* } */ fn g<'a>(x: &'a str) { tokio::spawn(async {}); }\n}\nfn f() { tokio::spawn(async {}); }\n",
            "app.rs:8: a loose spawn",
        ),
        (
            "src/app.rs",
            "//! h\n#[cfg(test)]\nfn helper() {}\nfn f() { tokio::spawn(async {}); }\n",
            "app.rs:4: a loose spawn",
        ),
        // The domain reads no clock: events are stamped in `src/events.rs`.
        (
            "src/domain/event.rs",
            "//! h\nlet t = Utc::now();\n",
            "a clock or random read in src/domain",
        ),
    ];
    for (rel, text, want) in cases {
        let found = check(rel, text);
        assert!(
            found.iter().any(|f| f.contains(want)),
            "{rel}: expected {want:?}, got {found:?}"
        );
    }
    // What the rules allow: comments, tests at the end of a file, downward edges, the store
    // writing SQL, the allowlisted spawn.
    for (rel, text) in [
        (
            "src/lanes/x.rs",
            "//! h\n// SELECT in a comment; sqlx too\nuse crate::store::Store;\n",
        ),
        (
            "src/app.rs",
            "//! h\nfn f() {}\n#[cfg(test)]\nmod tests { fn g() { tokio::spawn(async {}); } }\n",
        ),
        (
            "src/store/x.rs",
            "//! h\nlet q = sqlx::query(\"SELECT 1 LIMIT CAST($1 AS BIGINT)\");\n",
        ),
        ("src/tasks.rs", "//! h\nlet t = tokio::spawn(task);\n"),
        (
            "src/domain/x.rs",
            "//! h\nfn f() {}\n#[cfg(test)]\nmod tests { fn g() { let t = Utc::now(); } }\n",
        ),
        (
            "src/adapters/x.rs",
            "//! h\nbot.spawn(edge, &tracker, cancel);\ntracker.spawn(run());\n",
        ),
    ] {
        assert_eq!(check(rel, text), Vec::<String>::new(), "{rel}");
    }
}

#[test]
fn test_modules_are_found_and_keep_the_other_rules() {
    for (rel, text, want) in [
        (
            "src/adapters/telegram/mod.rs",
            "//! h\n#[cfg(test)]\nmod inbound_tests;\n",
            "src/adapters/telegram/inbound_tests.rs",
        ),
        (
            "src/domain/cron/catchup.rs",
            "//! h\n#[cfg(test)]\n#[path = \"catchup_tests.rs\"]\nmod tests;\n",
            "src/domain/cron/catchup_tests.rs",
        ),
        (
            "src/cli/sessions_io.rs",
            "//! h\n#[cfg(test)]\nmod tests;\n",
            "src/cli/sessions_io/tests.rs",
        ),
    ] {
        assert_eq!(test_items(rel, text).files, vec![want.to_string()], "{rel}");
    }
    // A test file may read the clock and spawn; it may not reach into the store's SQL.
    let clock = "//! h\nlet t = Instant::now();\n";
    assert_eq!(
        check_test_file("src/domain/cron/catchup_tests.rs", clock),
        Vec::<String>::new()
    );
    let spawn = "//! h\nlet j = tokio::spawn(async {});\n";
    assert_eq!(
        check_test_file("src/lanes/x_tests.rs", spawn),
        Vec::<String>::new()
    );
    let sql = "//! h\nlet r = sqlx::query(\"x\");\n";
    assert!(!check_test_file("src/lanes/x_tests.rs", sql).is_empty());
    let in_block = "//! h\n#[cfg(test)]\nmod tests { use teloxide::Bot; }\n";
    assert!(!check("src/lanes/x.rs", in_block).is_empty());
}
