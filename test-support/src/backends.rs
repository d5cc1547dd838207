//! Runs one store test body on every backend: SQLite (a fresh temp file per test) and Postgres
//! (a fresh schema per test in the `DATABASE_URL` database, skipped when it is unset). Shared
//! by the store contract files (`store_contract`, `handoff_store`, `handoff_nightly_store` in
//! `tests/it/`) through `contract!`.
//!
//! Nothing here mocks the store: every body runs real SQL. A failing body's schema is still
//! dropped before its panic is re-raised.

use std::future::Future;
use std::sync::Arc;

pub use herald::store::clock::ManualClock;
use herald::store::clock::{Clock, SystemClock};
use herald::store::Store;
use sqlx::{Connection, Executor};

/// Pool size per test store: enough for the race contracts to run queries side by side.
pub const POOL: u32 = 4;

/// Runs `body` against a fresh SQLite file. `migrate` is false only for the migration
/// contracts, which need a store on which `migrate` never ran.
pub async fn on_sqlite<F, Fut>(migrate: bool, body: F)
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    on_sqlite_with(migrate, Arc::new(SystemClock), body).await
}

/// [`on_sqlite`] with the clock the store reads "now" from.
pub async fn on_sqlite_with<F, Fut>(migrate: bool, clock: Arc<dyn Clock>, body: F)
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    let store = herald::store::connect_with_clock(&url, POOL, clock)
        .await
        .expect("open sqlite");
    let outcome = run_catching(store, migrate, body).await;
    drop(dir);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Runs `body` against a fresh schema in the `DATABASE_URL` database, dropped afterwards
/// (also when the body panics).
pub async fn on_postgres<F, Fut>(migrate: bool, body: F)
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    on_postgres_with(migrate, Arc::new(SystemClock), body).await
}

/// [`on_postgres`] with the clock the store reads "now" from.
pub async fn on_postgres_with<F, Fut>(migrate: bool, clock: Arc<dyn Clock>, body: F)
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    in_fresh_pg_schema("herald_test", |url| async move {
        let store = herald::store::connect_with_clock(&url, POOL, clock)
            .await
            .expect("open postgres");
        run_catching(store, migrate, body).await
    })
    .await
}

/// A body's outcome: `Err` carries its panic, re-raised after the cleanup.
pub type Outcome = Result<(), Box<dyn std::any::Any + Send>>;

/// Creates a fresh schema in the `DATABASE_URL` database, runs `body` with a URL whose every
/// connection has only that schema on its search path (so migrations and queries land
/// there), drops the schema, then re-raises the body's panic if it had one. Without
/// `DATABASE_URL` it prints a skip and runs nothing.
pub async fn in_fresh_pg_schema<F, Fut>(prefix: &str, body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let Ok(admin_url) = std::env::var("DATABASE_URL") else {
        crate::skip_or_fail("postgres: DATABASE_URL not set");
        return;
    };
    let schema = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&admin_url)
        .await
        .expect("connect to DATABASE_URL");
    admin
        .execute(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .await
        .expect("create test schema");
    let sep = if admin_url.contains('?') { '&' } else { '?' };
    let outcome = body(format!("{admin_url}{sep}options[search_path]={schema}")).await;
    admin
        .execute(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .await
        .expect("drop test schema");
    let _ = admin.close().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// Runs the body on its own task so that a failed assertion comes back as a value and the
/// caller can still clean up before re-raising it.
async fn run_catching<F, Fut>(store: Arc<dyn Store>, migrate: bool, body: F) -> Outcome
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    if migrate {
        store.migrate().await.expect("migrate");
    }
    let outcome = tokio::spawn(body(store.clone())).await;
    store.close().await;
    outcome.map_err(|e| match e.try_into_panic() {
        Ok(panic) => panic,
        Err(e) => Box::new(format!("test task did not finish: {e}")),
    })
}

/// One contract, two tests: `contract!(sqlite_name, postgres_name, path::to::body)`.
/// `contract!(unmigrated ...)` hands the body a store on which `migrate` never ran;
/// `contract!(clocked ...)` hands it the store and the [`ManualClock`] the store reads "now"
/// from, so a body moves time on instead of waiting for a lease or claim to expire. Four
/// worker threads, so the race contracts really run their contenders side by side.
#[macro_export]
macro_rules! contract {
    (clocked $sqlite:ident, $postgres:ident, $body:path) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $sqlite() {
            let clock = std::sync::Arc::new($crate::backends::ManualClock::new());
            let c = clock.clone();
            $crate::backends::on_sqlite_with(true, clock, move |s| $body(s, c)).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $postgres() {
            let clock = std::sync::Arc::new($crate::backends::ManualClock::new());
            let c = clock.clone();
            $crate::backends::on_postgres_with(true, clock, move |s| $body(s, c)).await;
        }
    };
    (unmigrated $sqlite:ident, $postgres:ident, $body:path) => {
        $crate::contract!(@emit false, $sqlite, $postgres, $body);
    };
    ($sqlite:ident, $postgres:ident, $body:path) => {
        $crate::contract!(@emit true, $sqlite, $postgres, $body);
    };
    (@emit $migrate:expr, $sqlite:ident, $postgres:ident, $body:path) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $sqlite() {
            $crate::backends::on_sqlite($migrate, $body).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $postgres() {
            $crate::backends::on_postgres($migrate, $body).await;
        }
    };
}
