//! SQLite backend: the embedded default. WAL mode, FTS5 search, and one writer connection.
//!
//! SQLite admits one writer at a time. With several writing connections the losers wait in
//! SQLite's busy handler, which sleeps (1 ms, 2 ms, 5 ms, … up to 100 ms) and polls, so under
//! many lanes most of a turn was spent asleep waiting for a lock that had long been free.
//! Every statement therefore goes to `pool`, a single connection whose callers queue in
//! order inside the process; reads that matter for latency use `reader`, a separate pool of
//! query-only connections that WAL lets run beside the writer.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, SqlitePool};

use super::clock::{Clock, SystemClock};
use super::common;
use super::db;
use super::search::{self, SearchHit, SearchScope};
use super::types::*;
use super::{Pools, Store, StoreError, StoreResult};
use crate::domain::Role;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

pub struct SqliteStore {
    /// The one writer (and the default for anything not marked as a read).
    pub(super) pool: SqlitePool,
    /// Query-only connections for reads; the same pool as `pool` for an in-memory database,
    /// where every connection would otherwise open a database of its own.
    pub(super) reader: SqlitePool,
    /// Where "now" comes from ([`super::clock`]).
    pub(super) clock: Arc<dyn Clock>,
}

/// An existing database file that cannot be opened for writing, named with the cause.
fn writable_file(path: &std::path::Path) -> StoreResult<()> {
    match std::fs::OpenOptions::new().write(true).open(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::other(format!(
            "the database file {} cannot be opened for writing: {}",
            path.display(),
            super::data_dir::cause(&e)
        ))),
        _ => Ok(()),
    }
}

impl SqliteStore {
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<SqliteStore> {
        if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            let path = path.split('?').next().unwrap_or(path);
            if let Some(dir) = std::path::Path::new(path).parent() {
                if !dir.as_os_str().is_empty() && path != ":memory:" {
                    // SQLite would say only "(code: 14) unable to open database file".
                    super::data_dir::prepare(dir).map_err(StoreError::other)?;
                    writable_file(std::path::Path::new(path))?;
                }
            }
        }
        let opts = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            .pragma("temp_store", "memory");
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(15))
            .connect_with(opts.clone())
            .await?;
        if in_memory {
            return Ok(SqliteStore {
                reader: pool.clone(),
                pool,
                clock: Arc::new(SystemClock),
            });
        }
        let reader = SqlitePoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(Duration::from_secs(15))
            // Readers' statements log at TRACE, the writer's at sqlx's DEBUG: a statement count
            // from the log tells writer round trips apart (`tests/it/store_statements.rs`).
            .connect_with(
                opts.pragma("query_only", "ON")
                    .log_statements(log::LevelFilter::Trace),
            )
            .await?;
        Ok(SqliteStore {
            pool,
            reader,
            clock: Arc::new(SystemClock),
        })
    }

    /// Opens an existing database read-only (`SQLITE_OPEN_READONLY`): no file, table or
    /// journal mode is created or changed, and any write fails. The reading CLI commands use it.
    pub async fn connect_read_only(url: &str) -> StoreResult<SqliteStore> {
        let opts = SqliteConnectOptions::from_str(url)?
            .read_only(true)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(15))
            .connect_with(opts)
            .await?;
        Ok(SqliteStore {
            reader: pool.clone(),
            pool,
            clock: Arc::new(SystemClock),
        })
    }

    /// The same store reading "now" from `clock` (a test's manual clock).
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> SqliteStore {
        SqliteStore { clock, ..self }
    }
}

impl super::Pools for SqliteStore {
    fn writer(&self) -> db::Pool<'_> {
        db::Pool::Sqlite(&self.pool)
    }
    fn reader(&self) -> db::Pool<'_> {
        db::Pool::Sqlite(&self.reader)
    }
    fn clock(&self) -> &dyn Clock {
        &*self.clock
    }
    fn migrator(&self) -> &'static sqlx::migrate::Migrator {
        &MIGRATOR
    }
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn close(&self) {
        self.reader.close().await;
        self.pool.close().await;
    }

    async fn search(
        &self,
        scope: SearchScope<'_>,
        query: &str,
        roles: &[Role],
        limit: i64,
    ) -> StoreResult<Vec<SearchHit>> {
        // A NUL ends FTS5's query text early ("unterminated string"): the store's one rule.
        let q = common::fts5_query(&super::text::clean(query));
        if q.is_empty() {
            return Ok(Vec::new());
        }
        // FTS5 serves `rowid < cursor ORDER BY rowid DESC` straight from its index; the lane,
        // flags and roles are checked on the batch (see `search.rs`).
        let (pool, q_ref) = (&self.reader, q.as_str());
        let found = search::newest_per_session(scope, roles, limit, |cursor, n| async move {
            let rows: Vec<search::Candidate> = sqlx::query_as(
                "SELECT m.id, m.session_id, m.lane, m.role, m.active, m.compacted, m.created_at, \
                 (SELECT s.agent FROM sessions s WHERE s.id = m.session_id) AS agent \
                 FROM (SELECT rowid FROM messages_fts WHERE messages_fts MATCH $1 \
                   AND rowid < $2 ORDER BY rowid DESC LIMIT CAST($3 AS BIGINT)) f \
                 JOIN messages m ON m.id = f.rowid",
            )
            .bind(q_ref)
            .bind(cursor)
            .bind(n)
            .fetch_all(pool)
            .await?;
            Ok(rows)
        })
        .await?;
        if found.is_empty() {
            return Ok(Vec::new());
        }
        // Snippets only for the rows returned; the ids are bound, the SQL has placeholders only.
        let marks: Vec<String> = (0..found.len()).map(|i| format!("${}", i + 2)).collect();
        let sql = format!(
            "SELECT rowid, snippet(messages_fts, 0, '[', ']', '…', 16) FROM messages_fts \
             WHERE messages_fts MATCH $1 AND rowid IN ({})",
            marks.join(", ")
        );
        let mut snippets = sqlx::query_as::<_, (i64, String)>(sqlx::AssertSqlSafe(sql)).bind(&q);
        for c in &found {
            snippets = snippets.bind(c.id);
        }
        let snippets: HashMap<i64, String> = snippets
            .fetch_all(&self.reader)
            .await?
            .into_iter()
            .collect();
        Ok(search::hits(found, |id| {
            snippets.get(&id).cloned().unwrap_or_default()
        }))
    }

    async fn outbox_claim(
        &self,
        holder: &str,
        platforms: &[String],
        limit: i64,
        claim_ttl: Duration,
    ) -> StoreResult<Vec<OutboxRow>> {
        if platforms.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now_ms();
        let sql = common::claim_sql(platforms, "")?;
        let mut out: Vec<OutboxRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .bind(holder)
            .bind(now + claim_ttl.as_millis() as i64)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        out.sort_by_key(|r| r.id);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MigrationStore;

    /// The claim finds each lane's first blocking row once, from the open rows' index: it does
    /// not grow with a chat's history of sent replies, nor with the number of candidates.
    #[tokio::test]
    async fn the_claim_reads_only_a_lanes_open_rows() {
        let store = SqliteStore::connect("sqlite::memory:", 1).await.unwrap();
        store.migrate().await.unwrap();
        let sql = format!(
            "EXPLAIN QUERY PLAN {}",
            common::claim_sql(&["web".to_string()], "").unwrap()
        );
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(0i64)
            .bind("holder")
            .bind(0i64)
            .bind(32i64)
            .fetch_all(&store.pool)
            .await
            .unwrap();
        let plan: Vec<String> = plan.into_iter().map(|(.., detail)| detail).collect();
        assert!(plan.iter().any(|d| d == "MATERIALIZE b"), "{plan:#?}");
        for d in plan
            .iter()
            .filter(|d| d.contains(" e ") || d.contains(" o "))
        {
            assert!(
                d.contains("USING INDEX outbox_status (status=?"),
                "an outbox read beyond the open rows: {d:?} in {plan:#?}"
            );
        }
    }
}
