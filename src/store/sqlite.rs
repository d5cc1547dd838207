//! SQLite backend: the embedded default. WAL mode, FTS5 search, and `BEGIN IMMEDIATE` write
//! transactions so that two writers queue on the busy timeout instead of failing on a lock
//! upgrade.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool};

use super::common::{self, store_impl, store_tx_helpers};
use super::search;
use super::types::*;
use super::{now_ms, Store, StoreError, StoreResult};
use crate::domain::{LaneKey, MessageEvent, Role};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

pub struct SqliteStore {
    pub(super) pool: SqlitePool,
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
                    std::fs::create_dir_all(dir).map_err(|e| {
                        StoreError::Other(format!(
                            "cannot create data folder {}: {e}",
                            dir.display()
                        ))
                    })?;
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
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(Duration::from_secs(15))
            .connect_with(opts)
            .await?;
        Ok(SqliteStore { pool })
    }

    pub(super) async fn begin(&self) -> StoreResult<sqlx::Transaction<'static, Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }
}

store_tx_helpers!(Sqlite);
super::handoff::handoff_store_impl!(SqliteStore);
super::context::context_impl!(SqliteStore, Sqlite);

store_impl!(SqliteStore, MIGRATOR, {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    async fn search(&self, query: &str, roles: &[Role], limit: i64) -> StoreResult<Vec<SearchHit>> {
        let q = common::fts5_query(query);
        if q.is_empty() {
            return Ok(Vec::new());
        }
        // FTS5 serves `rowid < cursor ORDER BY rowid DESC` straight from its index; the flags
        // and roles are checked on the batch (see `search.rs`).
        let (pool, q_ref) = (&self.pool, q.as_str());
        let found = search::newest_per_session(roles, limit, |cursor, n| async move {
            let rows: Vec<search::Candidate> = sqlx::query_as(
                "SELECT m.id, m.session_id, m.role, m.active, m.compacted, m.created_at \
                 FROM (SELECT rowid FROM messages_fts WHERE messages_fts MATCH $1 \
                   AND rowid < $2 ORDER BY rowid DESC LIMIT $3) f \
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
        let snippets: HashMap<i64, String> =
            snippets.fetch_all(&self.pool).await?.into_iter().collect();
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
        let now = now_ms();
        let sql = format!(
            "UPDATE outbox SET status = 'sending', claimed_by = $2, claim_until = $3 \
             WHERE id IN (SELECT o.id FROM outbox o WHERE {} AND {} \
               ORDER BY o.id LIMIT $4) RETURNING {}",
            common::platform_filter(platforms)?,
            common::OUTBOX_CLAIMABLE,
            common::OUTBOX_COLS
        );
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
});
