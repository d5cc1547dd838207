//! The one place the store meets sqlx's generic machinery, so that every concern is plain code
//! over both backends.
//!
//! sqlx types each query by its backend (`Query<'_, Sqlite, _>` or `Query<'_, Postgres, _>`), so
//! code written once for both either repeats a block of `Encode`/`Executor`/`FromRow` bounds on
//! every function (Rust does not carry such where-clauses along) or is expanded once per
//! backend. Here instead a statement is built backend-free — its text and a list of [`Arg`]s —
//! and each way to run it matches the backend once and calls sqlx concretely. Rows decode into
//! any [`StoreRow`], a type both backends can decode. The values bind as the same SQL types as
//! sqlx's own `bind` would give them (`i64` as `INT8`, text as `TEXT`, …): Postgres is strict.

use std::borrow::Cow;

use sqlx::error::BoxDynError;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgArguments, PgPool, PgRow, Postgres};
use sqlx::sqlite::{Sqlite, SqliteArguments, SqlitePool, SqliteRow};
use sqlx::{Arguments, Database, Encode, FromRow, SqlSafeStr, SqlStr, Transaction, Type};

use super::{StoreError, StoreResult};
use crate::domain::{LaneKey, SessionId};

/// One bound value, in the few Rust types the store binds.
#[derive(Debug, Clone)]
pub(crate) enum Arg<'a> {
    Int(i64),
    OptInt(Option<i64>),
    Float(f64),
    OptFloat(Option<f64>),
    Text(Cow<'a, str>),
    OptText(Option<Cow<'a, str>>),
}

impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}

impl From<&i64> for Arg<'_> {
    fn from(v: &i64) -> Self {
        Arg::Int(*v)
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Arg::OptInt(v)
    }
}

impl From<f64> for Arg<'_> {
    fn from(v: f64) -> Self {
        Arg::Float(v)
    }
}

impl From<Option<f64>> for Arg<'_> {
    fn from(v: Option<f64>) -> Self {
        Arg::OptFloat(v)
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(Cow::Borrowed(v))
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Arg::Text(Cow::Borrowed(v))
    }
}

impl From<String> for Arg<'_> {
    fn from(v: String) -> Self {
        Arg::Text(Cow::Owned(v))
    }
}

impl<'a> From<Cow<'a, str>> for Arg<'a> {
    fn from(v: Cow<'a, str>) -> Self {
        Arg::Text(v)
    }
}

impl<'a> From<&'a SessionId> for Arg<'a> {
    fn from(v: &'a SessionId) -> Self {
        Arg::Text(Cow::Borrowed(v.as_str()))
    }
}

impl<'a> From<&'a LaneKey> for Arg<'a> {
    fn from(v: &'a LaneKey) -> Self {
        Arg::Text(Cow::Borrowed(v.as_str()))
    }
}

impl<'a> From<&'a Option<SessionId>> for Arg<'a> {
    fn from(v: &'a Option<SessionId>) -> Self {
        Arg::OptText(v.as_deref().map(Cow::Borrowed))
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Arg::OptText(v.map(Cow::Borrowed))
    }
}

impl From<Option<String>> for Arg<'_> {
    fn from(v: Option<String>) -> Self {
        Arg::OptText(v.map(Cow::Owned))
    }
}

impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Arg::OptText(v.as_deref().map(Cow::Borrowed))
    }
}

impl<'a> From<Option<Cow<'a, str>>> for Arg<'a> {
    fn from(v: Option<Cow<'a, str>>) -> Self {
        Arg::OptText(v)
    }
}

/// A row type both backends decode (a `#[derive(FromRow)]` struct, a tuple of columns). The
/// bounds are supertraits, which Rust does carry along: generic code names only `R: StoreRow`.
pub(crate) trait StoreRow:
    for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}

impl<T> StoreRow for T where
    T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{
}

/// Which SQL dialect a statement runs in, for the few texts that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// A backend's pool, borrowed from its store.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pool<'p> {
    Sqlite(&'p SqlitePool),
    Pg(&'p PgPool),
}

impl Pool<'_> {
    pub(crate) fn dialect(self) -> Dialect {
        match self {
            Pool::Sqlite(_) => Dialect::Sqlite,
            Pool::Pg(_) => Dialect::Postgres,
        }
    }

    /// A write transaction. SQLite's takes the write lock at once (`BEGIN IMMEDIATE`), so two
    /// writers queue at the start instead of one failing when it first writes.
    pub(crate) async fn begin(self) -> StoreResult<Tx> {
        Ok(match self {
            Pool::Sqlite(p) => Tx::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
            Pool::Pg(p) => Tx::Pg(p.begin().await?),
        })
    }

    /// Applies `migrator`'s pending migrations, up to `to` when given.
    pub(crate) async fn migrate(
        self,
        migrator: &'static Migrator,
        to: Option<i64>,
    ) -> Result<(), sqlx::migrate::MigrateError> {
        match (self, to) {
            (Pool::Sqlite(p), None) => migrator.run(p).await,
            (Pool::Sqlite(p), Some(v)) => migrator.run_to(v, p).await,
            (Pool::Pg(p), None) => migrator.run(p).await,
            (Pool::Pg(p), Some(v)) => migrator.run_to(v, p).await,
        }
    }
}

/// An open transaction on either backend; dropped without [`Tx::commit`] it rolls back.
pub(crate) enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Pg(Transaction<'static, Postgres>),
}

impl Tx {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Tx::Sqlite(_) => Dialect::Sqlite,
            Tx::Pg(_) => Dialect::Postgres,
        }
    }

    pub(crate) async fn commit(self) -> StoreResult<()> {
        match self {
            Tx::Sqlite(tx) => tx.commit().await?,
            Tx::Pg(tx) => tx.commit().await?,
        }
        Ok(())
    }

    pub(crate) async fn rollback(self) -> StoreResult<()> {
        match self {
            Tx::Sqlite(tx) => tx.rollback().await?,
            Tx::Pg(tx) => tx.rollback().await?,
        }
        Ok(())
    }
}

/// Where a statement runs: a pool (a connection for this one statement) or a transaction.
pub(crate) enum On<'e> {
    Pool(Pool<'e>),
    Tx(&'e mut Tx),
}

impl<'e> From<Pool<'e>> for On<'e> {
    fn from(p: Pool<'e>) -> Self {
        On::Pool(p)
    }
}

impl<'e> From<&'e mut Tx> for On<'e> {
    fn from(tx: &'e mut Tx) -> Self {
        On::Tx(tx)
    }
}

/// A statement and its arguments, in the order of their `$N`.
#[must_use = "a query does nothing until it is run"]
pub(crate) struct Query<'a> {
    sql: SqlStr,
    args: Vec<Arg<'a>>,
}

/// A statement to bind and run: `db::query(SQL).bind(x).execute(&mut tx)`.
pub(crate) fn query<'a>(sql: impl SqlSafeStr) -> Query<'a> {
    let sql = sql.into_sql_str();
    // Room for every argument at once: a statement binds at most one per `$`.
    let marks = sql.as_str().bytes().filter(|&b| b == b'$').count();
    Query {
        sql,
        args: Vec::with_capacity(marks),
    }
}

impl<'a> Query<'a> {
    pub(crate) fn bind(mut self, value: impl Into<Arg<'a>>) -> Self {
        self.args.push(value.into());
        self
    }

    /// Runs the statement; returns the count of rows it changed.
    pub(crate) async fn execute<'e>(self, on: impl Into<On<'e>>) -> StoreResult<u64> {
        let Query { sql, args } = self;
        // Each arm hands sqlx its own executor (a pool or a transaction's connection), whose
        // future sqlx boxes: the store's futures stay as small as with sqlx called directly.
        Ok(match on.into() {
            On::Pool(Pool::Sqlite(p)) => sqlx::query_with(sql, sqlite(args)?)
                .execute(p)
                .await?
                .rows_affected(),
            On::Tx(Tx::Sqlite(tx)) => sqlx::query_with(sql, sqlite(args)?)
                .execute(&mut **tx)
                .await?
                .rows_affected(),
            On::Pool(Pool::Pg(p)) => sqlx::query_with(sql, pg(args)?)
                .execute(p)
                .await?
                .rows_affected(),
            On::Tx(Tx::Pg(tx)) => sqlx::query_with(sql, pg(args)?)
                .execute(&mut **tx)
                .await?
                .rows_affected(),
        })
    }

    pub(crate) async fn fetch_one<'e, R: StoreRow>(self, on: impl Into<On<'e>>) -> StoreResult<R> {
        let Query { sql, args } = self;
        Ok(match on.into() {
            On::Pool(Pool::Sqlite(p)) => {
                sqlx::query_as_with(sql, sqlite(args)?).fetch_one(p).await?
            }
            On::Tx(Tx::Sqlite(tx)) => {
                sqlx::query_as_with(sql, sqlite(args)?)
                    .fetch_one(&mut **tx)
                    .await?
            }
            On::Pool(Pool::Pg(p)) => sqlx::query_as_with(sql, pg(args)?).fetch_one(p).await?,
            On::Tx(Tx::Pg(tx)) => {
                sqlx::query_as_with(sql, pg(args)?)
                    .fetch_one(&mut **tx)
                    .await?
            }
        })
    }

    pub(crate) async fn fetch_optional<'e, R: StoreRow>(
        self,
        on: impl Into<On<'e>>,
    ) -> StoreResult<Option<R>> {
        let Query { sql, args } = self;
        Ok(match on.into() {
            On::Pool(Pool::Sqlite(p)) => {
                sqlx::query_as_with(sql, sqlite(args)?)
                    .fetch_optional(p)
                    .await?
            }
            On::Tx(Tx::Sqlite(tx)) => {
                sqlx::query_as_with(sql, sqlite(args)?)
                    .fetch_optional(&mut **tx)
                    .await?
            }
            On::Pool(Pool::Pg(p)) => {
                sqlx::query_as_with(sql, pg(args)?)
                    .fetch_optional(p)
                    .await?
            }
            On::Tx(Tx::Pg(tx)) => {
                sqlx::query_as_with(sql, pg(args)?)
                    .fetch_optional(&mut **tx)
                    .await?
            }
        })
    }

    pub(crate) async fn fetch_all<'e, R: StoreRow>(
        self,
        on: impl Into<On<'e>>,
    ) -> StoreResult<Vec<R>> {
        let Query { sql, args } = self;
        Ok(match on.into() {
            On::Pool(Pool::Sqlite(p)) => {
                sqlx::query_as_with(sql, sqlite(args)?).fetch_all(p).await?
            }
            On::Tx(Tx::Sqlite(tx)) => {
                sqlx::query_as_with(sql, sqlite(args)?)
                    .fetch_all(&mut **tx)
                    .await?
            }
            On::Pool(Pool::Pg(p)) => sqlx::query_as_with(sql, pg(args)?).fetch_all(p).await?,
            On::Tx(Tx::Pg(tx)) => {
                sqlx::query_as_with(sql, pg(args)?)
                    .fetch_all(&mut **tx)
                    .await?
            }
        })
    }
}

fn sqlite(args: Vec<Arg<'_>>) -> Result<SqliteArguments, sqlx::Error> {
    arguments(args)
}

fn pg(args: Vec<Arg<'_>>) -> Result<PgArguments, sqlx::Error> {
    arguments(args)
}

/// The backend's argument list, each value added as sqlx's `bind` adds it. The one where-clause
/// of sqlx bounds in the store.
fn arguments<A>(args: Vec<Arg<'_>>) -> Result<A, sqlx::Error>
where
    A: Arguments,
    i64: for<'q> Encode<'q, A::Database> + Type<A::Database>,
    f64: for<'q> Encode<'q, A::Database> + Type<A::Database>,
    for<'q> &'q str: Encode<'q, A::Database> + Type<A::Database>,
    Option<i64>: for<'q> Encode<'q, A::Database>,
    Option<f64>: for<'q> Encode<'q, A::Database>,
    for<'q> Option<&'q str>: Encode<'q, A::Database>,
    A::Database: Database,
{
    let mut out = A::default();
    out.reserve(args.len(), 0);
    for arg in &args {
        let added: Result<(), BoxDynError> = match arg {
            Arg::Int(v) => out.add(*v),
            Arg::OptInt(v) => out.add(*v),
            Arg::Float(v) => out.add(*v),
            Arg::OptFloat(v) => out.add(*v),
            Arg::Text(v) => out.add(&**v),
            Arg::OptText(v) => out.add(v.as_deref()),
        };
        added.map_err(sqlx::Error::Encode)?;
    }
    Ok(out)
}

/// Whether a store error is the database refusing a statement (a missing table, a violated
/// constraint), rather than a lost connection or a bad row.
pub(crate) fn refused_by_database(e: &StoreError) -> bool {
    let source = match e {
        StoreError::Other(cause) | StoreError::Unavailable(cause) => {
            std::error::Error::source(cause)
        }
        _ => None,
    };
    matches!(
        source.and_then(|s| s.downcast_ref::<sqlx::Error>()),
        Some(sqlx::Error::Database(_))
    )
}
