//! Long operator commands as an operator runs them: the real `herald` binary on a fresh SQLite
//! data folder, its stdout and stderr captured through pipes (as in a script or a redirect).
//! Progress bars belong on a terminal only: through a pipe, stdout must carry exactly the
//! results and stderr no bar codes.

use std::path::Path;
use std::process::{Command, Output};

use herald::store::{SqliteStore, Store};

fn herald(data: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_herald"))
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("run herald");
    assert!(
        out.status.success(),
        "herald {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

/// What a progress bar leaves in a stream: escape sequences and carriage-return redraws.
fn assert_no_bar(stderr: &[u8]) {
    let s = String::from_utf8_lossy(stderr);
    assert!(
        !s.contains('\u{1b}') && !s.contains('\r'),
        "bar codes on a piped stderr: {s:?}"
    );
}

/// The migrations shipped for SQLite, from their file names (`0003_cron.sql` → 3 "cron").
fn shipped_migrations() -> Vec<(i64, String)> {
    let mut files: Vec<_> = std::fs::read_dir("migrations/sqlite")
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sql"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|n| {
            let (num, rest) = n.trim_end_matches(".sql").split_once('_').unwrap();
            (num.parse().unwrap(), rest.replace('_', " "))
        })
        .collect()
}

#[test]
fn migrate_names_each_migration_then_has_nothing_to_do() {
    let data = tempfile::tempdir().unwrap();
    let out = herald(data.path(), &["migrate"]);
    let shipped = shipped_migrations();
    let mut expected: Vec<String> = shipped
        .iter()
        .map(|(v, d)| format!("applied {v} {d}"))
        .collect();
    expected.push(format!(
        "{} migrations applied to the sqlite store",
        shipped.len()
    ));
    assert_eq!(text(&out.stdout).lines().collect::<Vec<_>>(), expected);
    assert_no_bar(&out.stderr);

    let again = herald(data.path(), &["migrate"]);
    assert_eq!(
        text(&again.stdout),
        "nothing to do: the sqlite store has every migration applied\n"
    );
    assert_no_bar(&again.stderr);
}

#[tokio::test]
async fn export_through_a_pipe_is_exactly_the_jsonl_rows() {
    let data = tempfile::tempdir().unwrap();
    // An OpenAI-format transcript long enough that a terminal would show the bar moving.
    let mut lines = vec![r#"{"role":"system","content":"You are terse."}"#.to_string()];
    for i in 0..300 {
        lines.push(format!(r#"{{"role":"user","content":"question {i}"}}"#));
        lines.push(format!(r#"{{"role":"assistant","content":"answer {i}"}}"#));
    }
    let file = data.path().join("chat.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();

    let import = herald(data.path(), &["sessions", "import", file.to_str().unwrap()]);
    let said = text(&import.stdout);
    let id = said
        .trim_end()
        .strip_prefix("imported 600 messages as session ")
        .unwrap_or_else(|| panic!("unexpected import output: {said:?}"))
        .to_string();
    assert_no_bar(&import.stderr);

    let export = herald(data.path(), &["sessions", "export", &id]);
    assert_no_bar(&export.stderr);
    let url = format!("sqlite://{}", data.path().join("herald.db").display());
    let store = SqliteStore::connect(&url, 1).await.unwrap();
    let rows = herald::cli::export_jsonl(&store, &id).await.unwrap();
    store.close().await;
    assert_eq!(
        text(&export.stdout),
        rows,
        "stdout is the export, byte for byte"
    );
    assert_eq!(
        rows.lines().count(),
        601,
        "the system row and every message"
    );
}
