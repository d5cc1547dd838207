//! Postgres backend: several replicas share one database. Coordination is Postgres's own:
//! row locks (the lease check), unique constraints (inbox, outbox keys) and
//! `FOR UPDATE SKIP LOCKED` (outbox claims). No home-made consensus.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::Connection;

use super::clock::{Clock, SystemClock};
use super::common;
use super::db;
use super::search::{self, SearchHit, SearchScope};
use super::types::*;
use super::{Cause, Pools, Store, StoreError, StoreResult};
use crate::domain::Role;

/// Advisory lock key that serializes outbox claims ("heraldob" in ASCII).
const OUTBOX_CLAIM_LOCK: i64 = 0x6865_7261_6c64_6f62;

/// How long the first connection may take. A refused or unresolvable address fails at once;
/// this bounds only a host that does not answer.
const FIRST_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

pub struct PgStore {
    pub(super) pool: PgPool,
    /// The same pool: Postgres runs writers side by side, so reads need no pool of their own
    /// (the shared store code names `reader` for SQLite's sake).
    pub(super) reader: PgPool,
    /// Where "now" comes from ([`super::clock`]).
    pub(super) clock: Arc<dyn Clock>,
}

impl PgStore {
    /// One direct connection first, so an unreachable database fails within
    /// [`FIRST_CONNECT_TIMEOUT`] with its own error and the address it tried, rather than
    /// after the pool's 15 s of silent retries with "pool timed out".
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<PgStore> {
        Self::connect_as(url, max_connections, false).await
    }

    /// Every transaction of every connection is read-only (`default_transaction_read_only`):
    /// the reading CLI commands can neither migrate nor write by mistake.
    pub async fn connect_read_only(url: &str) -> StoreResult<PgStore> {
        Self::connect_as(url, 2, true).await
    }

    async fn connect_as(url: &str, max_connections: u32, read_only: bool) -> StoreResult<PgStore> {
        let mut opts: PgConnectOptions = url.parse().map_err(|e| {
            StoreError::other_from(format!("store.url is not a Postgres URL: {e}"), e)
        })?;
        if read_only {
            opts = opts.options([("default_transaction_read_only", "on")]);
        }
        let target = match opts.get_socket() {
            Some(socket) => format!("socket {}", socket.display()),
            None => format!("{}:{}", opts.get_host(), opts.get_port()),
        };
        let target = format!(
            "Postgres at {target} (database {}, user {})",
            opts.get_database().unwrap_or(opts.get_username()),
            opts.get_username()
        );
        tracing::info!(store = %target, "connecting to the store");
        match tokio::time::timeout(FIRST_CONNECT_TIMEOUT, PgConnection::connect_with(&opts)).await {
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
            }
            Ok(Err(e)) => {
                return Err(StoreError::unavailable_from(
                    format!("cannot connect to {target}: {e}"),
                    e,
                ))
            }
            Err(_) => {
                return Err(StoreError::Unavailable(Cause::new(format!(
                    "no answer from {target} within {} s",
                    FIRST_CONNECT_TIMEOUT.as_secs()
                ))))
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(2))
            .acquire_timeout(Duration::from_secs(15))
            .connect_with(opts)
            .await?;
        Ok(PgStore {
            reader: pool.clone(),
            pool,
            clock: Arc::new(SystemClock),
        })
    }

    /// The same store reading "now" from `clock` (a test's manual clock).
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> PgStore {
        PgStore { clock, ..self }
    }
}

impl super::Pools for PgStore {
    fn writer(&self) -> db::Pool<'_> {
        db::Pool::Pg(&self.pool)
    }
    fn reader(&self) -> db::Pool<'_> {
        db::Pool::Pg(&self.reader)
    }
    fn clock(&self) -> &dyn Clock {
        &*self.clock
    }
    fn migrator(&self) -> &'static sqlx::migrate::Migrator {
        &MIGRATOR
    }
}

#[async_trait::async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    async fn search(
        &self,
        scope: SearchScope<'_>,
        query: &str,
        roles: &[Role],
        limit: i64,
    ) -> StoreResult<Vec<SearchHit>> {
        // A NUL in a query is as unbindable as in a write: the same rule (`text.rs`).
        let tsquery = common::pg_tsquery(&super::text::clean(query));
        if tsquery.is_empty() {
            return Ok(Vec::new());
        }
        let query = tsquery.as_str();
        // Unnamed statements (`persistent(false)`) are planned with the actual words: the
        // planner then walks the primary key backwards for a common word and takes the GIN
        // index (then sorts the few hits) for a rare one. A cached generic plan would pick one
        // of the two for every word.
        let (pool, names) = (&self.reader, search::role_names(roles));
        let (names, lane) = (names.as_slice(), scope.lane());
        let found = search::newest_per_session(scope, roles, limit, |cursor, n| async move {
            let rows: Vec<search::Candidate> = sqlx::query_as(
                "SELECT id, session_id, lane, role, active, compacted, created_at, \
                 (SELECT s.agent FROM sessions s WHERE s.id = messages.session_id) AS agent \
                 FROM messages \
                 WHERE tsv @@ to_tsquery('simple', $1) AND id < $2 \
                   AND ($5::text IS NULL OR lane = $5) \
                   AND NOT (active = 0 AND compacted = 0) \
                   AND (cardinality($4::text[]) = 0 OR role = ANY($4)) \
                 ORDER BY id DESC LIMIT CAST($3 AS BIGINT)",
            )
            .persistent(false)
            .bind(query)
            .bind(cursor)
            .bind(n)
            .bind(names)
            .bind(lane)
            .fetch_all(pool)
            .await?;
            Ok(rows)
        })
        .await?;
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = found.iter().map(|c| c.id).collect();
        let snippets: HashMap<i64, String> = sqlx::query_as::<_, (i64, String)>(
            "SELECT id, ts_headline('simple', content, to_tsquery('simple', $1), \
               'StartSel=[, StopSel=], MaxWords=16, MinWords=4') \
             FROM messages WHERE id = ANY($2)",
        )
        .bind(query)
        .bind(&ids)
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
        // Claims are serialized by a transaction-scoped advisory lock. Without it, `SKIP LOCKED`
        // lets a second claimer pass over a lane's first chunk (locked, not yet committed as
        // `sending`) and take the second one, because its snapshot still shows the first as
        // merely pending: two replicas would then send one lane's chunks out of order. Each
        // statement takes its snapshot after the lock is granted, so it sees earlier claims.
        if platforms.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(OUTBOX_CLAIM_LOCK)
            .execute(&mut *tx)
            .await?;
        let now = self.now_ms();
        let sql = common::claim_sql(platforms, " FOR UPDATE OF o SKIP LOCKED")?;
        let mut out: Vec<OutboxRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .bind(holder)
            .bind(now + claim_ttl.as_millis() as i64)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        out.sort_by_key(|r| r.id);
        Ok(out)
    }
}
