//! The store as the CLI leaves it: only `migrate` (and `serve`) change the schema. A reading
//! command opens the store read-only, says "run `herald migrate`" for a store without this
//! release's migrations and refuses one a newer release migrated; stdout carries the command's
//! output and never a log line. The real binary, on SQLite and on a fresh Postgres schema.

use std::path::Path;

use futures::FutureExt;
use herald_test_support::herald::Herald;
use sqlx::{Connection, Executor};

/// Reading commands, each of which used to migrate the store it was pointed at.
const READERS: &[&[&str]] = &[
    &["sessions", "list"],
    &["sessions", "search", "hello"],
    &["sessions", "show", "s-1"],
    &["pairing", "list"],
    &["cron", "list"],
    &["cron", "log"],
    &["handoff", "show", "web:alice"],
];

/// (exit code, stdout, stderr) of herald on `data`, with `env` on top of a clean environment.
fn herald(data: &Path, env: &[(&str, &str)], args: &[&str]) -> (i32, String, String) {
    let out = Herald::new()
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .envs(env.iter().copied())
        .output();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn says_run_migrate(args: &[&str], code: i32, stdout: &str, stderr: &str) {
    assert_eq!(code, 1, "{args:?}: {stdout}{stderr}");
    assert_eq!(stdout, "", "{args:?}");
    assert!(
        stderr.contains("has no Herald tables yet: run `herald migrate`")
            && stderr.contains(&format!("then `herald {}", args[..2].join(" "))),
        "{args:?}: {stderr}"
    );
}

async fn sqlite_tables(db: &Path) -> Vec<String> {
    let url = format!("sqlite://{}?mode=ro", db.display());
    let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let rows: Vec<(String,)> =
        sqlx::query_as("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&mut c)
            .await
            .unwrap();
    c.close().await.unwrap();
    rows.into_iter().map(|(n,)| n).collect()
}

/// A SQLite file that holds someone else's table: reading commands add nothing to it (not a
/// table, not a byte), `migrate` then makes it Herald's, and a migration from a newer release
/// is refused by the readers too.
#[tokio::test]
async fn reading_commands_leave_an_unmigrated_sqlite_file_untouched() {
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("herald.db");
    {
        let url = format!("sqlite://{}?mode=rwc", db.display());
        let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
        c.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
            .await
            .unwrap();
        c.close().await.unwrap();
    }
    let before = std::fs::read(&db).unwrap();
    for args in READERS {
        let (code, stdout, stderr) = herald(data.path(), &[], args);
        says_run_migrate(args, code, &stdout, &stderr);
    }
    assert_eq!(sqlite_tables(&db).await, vec!["notes".to_string()]);
    assert!(std::fs::read(&db).unwrap() == before, "the file changed");

    let (code, _, stderr) = herald(data.path(), &[], &["migrate"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = herald(data.path(), &[], &["sessions", "list"]);
    assert_eq!((code, stdout.as_str()), (0, "no sessions\n"), "{stderr}");

    // A newer release's migration: readers refuse as `serve` and `migrate` do.
    {
        let url = format!("sqlite://{}", db.display());
        let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
        c.execute(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
             execution_time) VALUES (9999, 'future', 1, x'00', 0)",
        )
        .await
        .unwrap();
        c.close().await.unwrap();
    }
    let (code, stdout, stderr) = herald(data.path(), &[], &["sessions", "list"]);
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert!(
        stderr.contains("migration 9999 applied, which this binary does not know"),
        "{stderr}"
    );
}

/// A new, empty Postgres database: `sessions list` creates no table and says to migrate;
/// after `herald migrate` it answers, and stdout holds exactly the answer (the INFO line
/// "connecting to the store" used to lead every Postgres command's stdout).
#[tokio::test]
async fn reading_commands_leave_an_empty_postgres_untouched_and_stdout_clean() {
    herald_test_support::backends::in_fresh_pg_schema("herald_cli", |url| {
        std::panic::AssertUnwindSafe(pg_body(url)).catch_unwind()
    })
    .await;
}

async fn pg_body(url: String) {
    {
        let data = tempfile::tempdir().unwrap();
        let env = [("HERALD_STORE__URL", url.as_str())];
        for args in READERS {
            let (code, stdout, stderr) = herald(data.path(), &env, args);
            says_run_migrate(args, code, &stdout, &stderr);
        }
        let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
        let (tables,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()",
        )
        .fetch_one(&mut c)
        .await
        .unwrap();
        c.close().await.unwrap();
        assert_eq!(tables, 0, "a reading command created tables");

        let (code, stdout, stderr) = herald(data.path(), &env, &["migrate"]);
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stdout.lines().all(|l| l.starts_with("applied ")
                || l.ends_with("migrations applied to the postgres store")),
            "stdout holds only the migrations: {stdout}"
        );
        assert!(
            stderr.contains("connecting to the store"),
            "the log line is on stderr: {stderr}"
        );
        for (args, said) in [
            (&["sessions", "list"][..], "no sessions\n"),
            (
                &["pairing", "list"],
                "no pending pairing codes\nno senders approved through pairing\n",
            ),
        ] {
            let (code, stdout, stderr) = herald(data.path(), &env, args);
            assert_eq!((code, stdout.as_str()), (0, said), "{args:?}: {stderr}");
        }
    }
}
