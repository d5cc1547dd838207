//! Long operator commands as an operator runs them: the real `herald` binary on a fresh SQLite
//! data folder, its stdout and stderr captured through pipes (as in a script or a redirect).
//! Progress bars belong on a terminal only: through a pipe, stdout must carry exactly the
//! results and stderr no bar codes.

mod day_one;
mod store_access;

use std::path::Path;
use std::process::Output;

use herald::store::{SqliteStore, Store};
use herald_test_support::herald::Herald;

fn herald(data: &Path, args: &[&str]) -> Output {
    let out = Herald::new()
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output();
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

    // `import` writes rows but creates no schema: only `migrate` (and `serve`) do.
    herald(data.path(), &["migrate"]);
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

/// Runs herald without asserting success: (exit code, stdout, stderr).
fn run(data: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Herald::new()
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

/// `--data-dir /wrong/path`: a reading command says there is no database there and leaves
/// none behind, instead of creating an empty one and printing nothing.
#[test]
fn reading_commands_refuse_a_missing_database_and_create_none() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("wrong");
    for args in [
        &["sessions", "list"][..],
        &["sessions", "show", "s-1"],
        &["sessions", "search", "hello"],
        &["sessions", "export", "s-1"],
        &["sessions", "compact", "s-1", "--dry-run"],
        &["pairing", "list"],
        &["pairing", "approve", "telegram", "ABCD"],
        &["handoff", "show", "web:alice"],
        &["cron", "list"],
        &["cron", "log"],
    ] {
        let (code, stdout, stderr) = run(&data, args);
        assert_eq!(code, 1, "{args:?}: {stdout}{stderr}");
        assert_eq!(stdout, "", "{args:?}");
        let db = data.join("herald.db");
        assert!(
            stderr.contains(&format!("no database at {}", db.display()))
                && stderr.contains(&format!("`herald {}", args[..2].join(" ")))
                && stderr.contains("daemon's configuration and environment"),
            "{args:?}: {stderr}"
        );
        assert!(!db.exists(), "{args:?} created {}", db.display());
    }
}

#[test]
fn empty_results_say_so() {
    let data = tempfile::tempdir().unwrap();
    herald(data.path(), &["migrate"]);
    for (args, said) in [
        (&["sessions", "list"][..], "no sessions\n"),
        (&["sessions", "search", "hello"], "no matches\n"),
        (&["cron", "log"], "no cron runs\n"),
        (
            &["pairing", "list"],
            "no pending pairing codes\nno senders approved through pairing\n",
        ),
    ] {
        assert_eq!(text(&herald(data.path(), args).stdout), said, "{args:?}");
    }
}

/// An unreachable Postgres fails the start within seconds, naming the address it tried: a
/// refused port at once, a host that accepts and never answers after the 5 s first-connect
/// bound (it used to be 15 s of silence and "pool timed out").
#[test]
fn an_unreachable_postgres_fails_fast_saying_what_it_tried() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = closed.local_addr().unwrap().port();
    drop(closed);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let held = std::thread::spawn(move || {
        let conns: Vec<_> = silent.incoming().take(4).collect();
        std::thread::sleep(std::time::Duration::from_secs(8));
        drop(conns);
    });
    let data = tempfile::tempdir().unwrap();
    for (port, within, says) in [
        (refused, 2, "cannot connect to Postgres at 127.0.0.1:"),
        (silent_port, 7, "no answer from Postgres at 127.0.0.1:"),
    ] {
        let started = std::time::Instant::now();
        let out = Herald::new()
            .arg("--data-dir")
            .arg(data.path())
            .arg("migrate")
            .env(
                "HERALD_STORE__URL",
                format!("postgres://herald:secret-pw@127.0.0.1:{port}/heraldb"),
            )
            .output();
        let took = started.elapsed();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("{says}{port} (database heraldb, user herald)")),
            "{stderr}"
        );
        assert!(!stderr.contains("secret-pw"), "{stderr}");
        assert!(
            took < std::time::Duration::from_secs(within),
            "took {took:?} for port {port}: {stderr}"
        );
        println!("port {port}: failed after {took:?}: {}", stderr.trim());
    }
    drop(held);
}
