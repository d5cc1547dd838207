//! House rules of the source tree, checked on every `cargo test` (in the manner of
//! rust-analyzer's tidy tests): where SQL and platform crates may appear, what `domain` may
//! import, the direction of `use crate::` edges between top-level modules, the `//!` header of
//! every file, and where a task may be spawned outside the app's tracker.
//!
//! The checks are plain text rules over `src/`, written as a function of (path, text) so that
//! the last test can plant each kind of violation and see it reported.

use std::path::{Path, PathBuf};

/// Top-level modules in the order of the data path: a module may import only modules of a
/// lower rank. Same rank means no edge either way.
const RANKS: &[(&str, u8)] = &[
    ("domain", 0),
    ("tasks", 0),
    ("test_rng", 0),
    ("config", 1),
    ("telemetry", 2),
    ("store", 2),
    ("llm", 2),
    ("agent", 3),
    ("delivery", 3),
    ("hooks", 3),
    ("lanes", 4),
    ("cron", 5),
    ("handoff", 6),
    ("adapters", 7),
    ("http", 7),
    ("cli", 8),
    ("app", 9),
];

/// Files allowed to spawn a task that is not on the app's tracker, and why.
const SPAWN_ALLOWED: &[(&str, &str)] = &[(
    "src/tasks.rs",
    "spawn_owned: the task is aborted when its owner drops, panicking or not",
)];

fn rank(module: &str) -> Option<u8> {
    RANKS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
}

/// The top-level module a file under `src/` belongs to (`src/lanes/turn.rs` → `lanes`).
fn module_of(rel: &str) -> Option<&str> {
    let rest = rel.strip_prefix("src/")?;
    let first = rest.split('/').next()?;
    Some(first.strip_suffix(".rs").unwrap_or(first))
}

/// The code of a file: no comment lines, and nothing from the first `#[cfg(test)]` on (unit
/// tests sit at the end of a file by convention and may do what production code may not).
fn code(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push((n + 1, line));
    }
    out
}

fn words(line: &str, needle: &str) -> bool {
    line.match_indices(needle).any(|(i, _)| {
        i == 0 || !line.as_bytes()[i - 1].is_ascii_alphanumeric() && line.as_bytes()[i - 1] != b'_'
    })
}

/// Every rule broken by one file, as `path:line: what`.
pub fn check(rel: &str, text: &str) -> Vec<String> {
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
    for (n, line) in code(text) {
        if !is_store {
            if words(line, "sqlx::") {
                out.push(format!("{rel}:{n}: sqlx outside src/store"));
            }
            if line.contains('"') && sql.iter().any(|k| line.contains(&format!("\"{k}"))) {
                out.push(format!("{rel}:{n}: SQL outside src/store"));
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
        }
        if (line.contains("tokio::spawn(") || line.contains("std::thread::spawn("))
            && !SPAWN_ALLOWED.iter().any(|(f, _)| *f == rel)
        {
            out.push(format!(
                "{rel}:{n}: a loose spawn (put the task on the app's TaskTracker)"
            ));
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
    let mut broken = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        broken.extend(check(&rel, &std::fs::read_to_string(path).unwrap()));
    }
    assert!(files.len() > 100, "only {} files found", files.len());
    assert!(
        broken.is_empty(),
        "house rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn each_rule_catches_a_planted_violation() {
    let cases: [(&str, &str, &str); 8] = [
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
            "//! h\nlet q = sqlx::query(\"SELECT 1\");\n",
        ),
        ("src/tasks.rs", "//! h\nlet t = tokio::spawn(task);\n"),
    ] {
        assert_eq!(check(rel, text), Vec::<String>::new(), "{rel}");
    }
}
