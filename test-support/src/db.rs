//! End-to-end tests on each store backend: `App::start` on SQLite (the harness default, a file
//! in the test's data folder) or on a fresh Postgres schema in the `DATABASE_URL` database,
//! dropped afterwards, also when the test panics. Without `DATABASE_URL` the Postgres variant
//! says so and passes, like the store contract tests.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use herald::config::{Config, Secret};

#[derive(Debug, Clone)]
pub enum Db {
    Sqlite,
    /// A connection URL whose search path is the test's own schema.
    Postgres(String),
}

impl Db {
    /// Points `config` at this backend.
    pub fn apply(&self, config: &mut Config) {
        if let Db::Postgres(url) = self {
            config.store.url = Some(Secret::new(url.clone()));
        }
    }

    /// Runs `sql` (statements as the backend's driver takes them in one call) on the store
    /// `config` uses, beside the running daemon: how a test makes the database itself refuse a
    /// write (a trigger), the way a real store fault would.
    pub async fn execute(&self, config: &Config, sql: &str) {
        use sqlx::{Connection, Executor};
        match self {
            Db::Sqlite => {
                let mut c = sqlx::SqliteConnection::connect(&config.store_url())
                    .await
                    .expect("open the test's sqlite file");
                c.execute(sqlx::AssertSqlSafe(sql.to_string()))
                    .await
                    .expect("test SQL");
                let _ = c.close().await;
            }
            Db::Postgres(url) => {
                let mut c = sqlx::PgConnection::connect(url)
                    .await
                    .expect("connect to the test schema");
                c.execute(sqlx::AssertSqlSafe(sql.to_string()))
                    .await
                    .expect("test SQL");
                let _ = c.close().await;
            }
        }
    }
}

/// Runs `body` on SQLite.
pub async fn on_sqlite<F, Fut>(body: F)
where
    F: FnOnce(Db) -> Fut,
    Fut: Future<Output = ()>,
{
    body(Db::Sqlite).await
}

/// Runs `body` on a fresh Postgres schema, dropped afterwards.
pub async fn on_postgres<F, Fut>(body: F)
where
    F: FnOnce(Db) -> Fut,
    Fut: Future<Output = ()>,
{
    crate::backends::in_fresh_pg_schema("herald_e2e", |url| {
        AssertUnwindSafe(body(Db::Postgres(url))).catch_unwind()
    })
    .await
}

/// `on_each_backend!(sqlite_test, postgres_test, body)`: one body, a test per backend.
#[macro_export]
macro_rules! on_each_backend {
    ($sqlite:ident, $postgres:ident, $body:path) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $sqlite() {
            $crate::db::on_sqlite($body).await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $postgres() {
            $crate::db::on_postgres($body).await;
        }
    };
}
