//! Durable state: inbox, transcripts, outbox, leases, key/value.
//!
//! The only module that names sqlx or contains SQL. Two backends implement [`Store`]:
//! SQLite (embedded default, WAL) and Postgres (several replicas). Every transcript write takes
//! the caller's [`Lease`] and checks it *inside the same transaction*, by updating the lease row
//! with the caller's holder and fencing token: a worker that lost its lease cannot land a row,
//! and a takeover waits for an in-flight write to commit before it sees the transcript.

mod approvals;
pub mod clock;
mod common;
mod context;
mod cron;
mod cron_types;
pub mod data_dir;
mod db;
mod handoff;
mod inbox;
mod kv;
mod leases;
mod migrations;
mod nightly;
mod outbox;
mod outbox_key;
mod pairing;
mod postgres;
mod search;
mod session_id;
mod signal;
mod speakers;
mod spend;
mod sqlite;
mod status;
mod steps;
mod text;
mod transcript;
mod turns;
mod tx;
mod types;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::Role;
use clock::Clock;

pub use approvals::{ApprovalRow, ApprovalStatus, ApprovalStore, NewApproval};
pub use common::unknown_migrations_message;
pub use context::{ContextRow, ContextStore, ImportedMessage};
pub use cron::CronStore;
pub use cron_types::*;
pub use handoff::{CapsuleRow, HandoffStore, NewCapsule, PendingTake};
pub use inbox::InboxStore;
pub use kv::KvStore;
pub use leases::{LeaseStore, ROLE_LEASE_TTL, ROLE_RENEW_EVERY, ROLE_TAKEOVER_BOUND};
pub use migrations::MigrationStore;
pub use nightly::{CandidateQuery, NightlyCandidate, NightlyStore};
pub use outbox::{DeliveryReport, OutboxStore};
pub use pairing::{
    ApprovedSender, PairingAsk, PairingOutcome, PairingRequest, PairingStatus, PairingStore,
    APPROVED_NOTICE, APPROVED_REQUEUED,
};
pub use postgres::PgStore;
pub use search::{SearchHit, SearchScope};
pub use signal::{Signal, SignalRx, SignalStore};
pub use speakers::SpeakerStore;
pub use spend::{Billed, CapHit, CapLimit, NewHold, Reserved, SpendRow, SpendScope, SpendStore};
pub use sqlite::SqliteStore;
pub use steps::{StepContext, TurnStep, TurnStepDone};
pub use transcript::TranscriptStore;
pub use turns::TurnStore;
pub use types::*;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The caller's lease was taken over (or released): it must stop writing for this lane.
    #[error("lease {name} lost (held by someone else now)")]
    LeaseLost { name: String },
    #[error("not found: {0}")]
    NotFound(String),
    /// The database could not be reached or answered with a transient failure; retrying later
    /// is the right move.
    #[error("store unavailable: {0}")]
    Unavailable(#[source] Cause),
    #[error("store error: {0}")]
    Other(#[source] Cause),
}

/// What went wrong, in words, and the error that caused it when there is one (the sqlx,
/// migration, JSON or I/O error): `source()` reaches it, so a `{:#}` chain or a log shows the
/// driver's own error under the store's words.
#[derive(Debug)]
pub struct Cause {
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Cause {
    pub fn new(message: impl Into<String>) -> Cause {
        Cause {
            message: message.into(),
            source: None,
        }
    }

    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Cause {
        Cause {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl StoreError {
    /// A failure described in words only (a caller bug, a refused input, a bad row).
    pub fn other(message: impl Into<String>) -> StoreError {
        StoreError::Other(Cause::new(message))
    }

    /// A failure in words with the error underneath it.
    pub fn other_from(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Other(Cause::with_source(message, source))
    }

    /// The database could not be reached: retrying later is the right move.
    pub fn unavailable_from(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> StoreError {
        StoreError::Unavailable(Cause::with_source(message, source))
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        let transient = match &e {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Tls(_) => true,
            sqlx::Error::Database(db) => is_transient_db_error(db.code().as_deref()),
            _ => false,
        };
        let message = e.to_string();
        if transient {
            StoreError::unavailable_from(message, e)
        } else {
            StoreError::other_from(message, e)
        }
    }
}

/// SQLite busy/locked and Postgres admin shutdown / connection failures / serialization.
fn is_transient_db_error(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "5" | "6"
                | "517"
                | "261"
                | "57P01"
                | "57P02"
                | "57P03"
                | "08000"
                | "08003"
                | "08006"
                | "40001"
                | "40P01"
        )
    )
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::other_from(format!("stored JSON is invalid: {e}"), e)
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

#[async_trait]
pub trait Store:
    InboxStore
    + LeaseStore
    + TranscriptStore
    + TurnStore
    + OutboxStore
    + KvStore
    + PairingStore
    + HandoffStore
    + NightlyStore
    + CronStore
    + ContextStore
    + ApprovalStore
    + SpendStore
    + SignalStore
    + SpeakerStore
    + MigrationStore
    + Send
    + Sync
    + 'static
{
    /// `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;
    async fn close(&self);

    // --- per dialect (the shared rest is in the supertraits) -------------------------------
    /// Discovery: the newest matching message of each session in `scope` (live or compacted,
    /// never retracted; only `roles` when not empty), at most `limit` sessions (1,000 at most),
    /// newest first.
    async fn search(
        &self,
        scope: SearchScope<'_>,
        query: &str,
        roles: &[Role],
        limit: i64,
    ) -> StoreResult<Vec<SearchHit>>;
    /// Claims due rows for the given platforms, at most one lane's rows in order and never a
    /// row while an earlier row of its lane waits: chunks arrive in order.
    async fn outbox_claim(
        &self,
        holder: &str,
        platforms: &[String],
        limit: i64,
        claim_ttl: Duration,
    ) -> StoreResult<Vec<OutboxRow>>;
}

/// Opens the store named by a URL (`sqlite://path` or `postgres://…`).
pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Arc<dyn Store>> {
    connect_with_clock(url, max_connections, Arc::new(clock::SystemClock)).await
}

/// [`connect`] with the clock the store reads "now" from (a test's [`clock::ManualClock`]).
pub async fn connect_with_clock(
    url: &str,
    max_connections: u32,
    clock: Arc<dyn Clock>,
) -> StoreResult<Arc<dyn Store>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(
            PgStore::connect(url, max_connections)
                .await?
                .with_clock(clock),
        ))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(
            SqliteStore::connect(url, max_connections)
                .await?
                .with_clock(clock),
        ))
    } else {
        Err(StoreError::other(format!(
            "store.url must start with sqlite:// or postgres://, got {url:?}"
        )))
    }
}

/// Opens an existing store read-only: nothing is created, migrated or written (SQLite opens
/// the file read-only; Postgres sessions default to read-only transactions).
pub async fn connect_read_only(url: &str) -> StoreResult<Arc<dyn Store>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::connect_read_only(url).await?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::connect_read_only(url).await?))
    } else {
        Err(StoreError::other(format!(
            "store.url must start with sqlite:// or postgres://, got {url:?}"
        )))
    }
}

/// A backend's pools: every concern is one impl over this trait (`impl<S: Pools> … for S`),
/// running its statements through [`db`]. Writes go to `writer`, reads that may run beside it
/// to `reader`.
pub(crate) trait Pools: Send + Sync {
    fn writer(&self) -> db::Pool<'_>;
    fn reader(&self) -> db::Pool<'_>;
    /// The store's clock ([`clock`]): every time the store stamps or compares is read here.
    fn clock(&self) -> &dyn Clock;
    /// The backend's embedded migrations.
    fn migrator(&self) -> &'static sqlx::migrate::Migrator;
    fn now_ms(&self) -> i64 {
        self.clock().now_ms()
    }
    /// A write transaction on the writer ([`db::Pool::begin`]).
    fn begin(&self) -> impl std::future::Future<Output = StoreResult<db::Tx>> + Send {
        self.writer().begin()
    }
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
