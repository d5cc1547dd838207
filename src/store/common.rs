//! The SQL both backends share, written once.
//!
//! Timestamps are epoch milliseconds and flags are integers in both schemas, and every query
//! uses `$N` placeholders in order of first appearance (SQLite reads them as numbered
//! parameters), so one text serves both. This file holds what several concerns use (column
//! lists, row decoders, the lease checks, the outbox claim's filter) and `store_impl!`, which
//! expands [`super::Store`] itself: the migrations written once, plus the dialect-specific
//! pieces (outbox claim, search, close) passed in. Each concern's shared methods live in its
//! own file (`inbox.rs`, `leases.rs`, `transcript.rs`, `turns.rs`, `outbox.rs`, `kv.rs`).

use super::types::*;
use super::{StoreError, StoreResult};
use crate::domain::{Attachment, LaneKey, MessageEvent, Role, ToolCall};

pub(super) const INBOX_COLS: &str =
    "id, lane, event, status, attempts, note, session_id, reply_message_id, received_at";
pub(super) const MESSAGE_COLS: &str = "id, session_id, role, content, api_content, tool_calls, \
     tool_call_id, tool_name, active, compacted, platform_message_id, media, created_at";
pub(super) const SESSION_COLS: &str = "id, lane, parent_id, started_at, ended_at, end_reason, \
     system_prompt, model, compaction_strikes, fallback_streak, cooldown_until, agent";
pub(super) const OUTBOX_COLS: &str = "id, idem_key, reply_key, lane, platform, chat_id, thread_id, reply_to, \
     inbox_id, chunk_index, text, status, attempts, platform_message_id, last_error, created_at, sent_at, media";

/// The lease check every transcript write runs first, inside its transaction. Updating the
/// row (rather than reading it) takes its lock, so a concurrent takeover waits for our commit.
pub(super) const LEASE_CHECK: &str =
    "UPDATE leases SET expires_at = expires_at WHERE name = $1 AND holder = $2 AND token = $3";

/// The lease check for a write into one session: the lease is current and is the lease of the
/// session's lane (a lease name is the lane key), so holding one lane's lease never lets a
/// worker write into another lane's transcript.
pub(super) const LEASE_CHECK_SESSION: &str =
    "UPDATE leases SET expires_at = expires_at WHERE name = $1 AND holder = $2 AND token = $3 \
     AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = $4 AND s.lane = $1)";

pub(super) const LEASE_ACQUIRE: &str =
    "INSERT INTO leases (name, holder, token, expires_at, acquired_at) \
     VALUES ($1, $2, 1, $3, $4) \
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = leases.token + 1, \
     expires_at = excluded.expires_at, acquired_at = excluded.acquired_at \
     WHERE leases.expires_at < $4 OR leases.holder = excluded.holder \
     RETURNING token";

/// An inbox row as stored: the event is JSON, the lane and status text.
#[derive(sqlx::FromRow)]
pub(super) struct InboxRaw {
    id: i64,
    lane: String,
    event: String,
    status: String,
    attempts: i64,
    note: Option<String>,
    session_id: Option<SessionId>,
    reply_message_id: Option<i64>,
    received_at: i64,
}

impl InboxRaw {
    pub(super) fn typed(self) -> StoreResult<InboxRow> {
        let event: MessageEvent = serde_json::from_str(&self.event)?;
        Ok(InboxRow {
            id: self.id,
            lane: LaneKey::parse(&self.lane),
            event,
            status: InboxStatus::parse(&self.status)?,
            attempts: self.attempts,
            note: self.note,
            session_id: self.session_id,
            reply_message_id: self.reply_message_id,
            received_at: self.received_at,
        })
    }
}

/// A dead-lettered inbox row: [`InboxRaw`]'s columns and `done_at`, when it was given up.
#[derive(sqlx::FromRow)]
pub(super) struct DeadRaw {
    #[sqlx(flatten)]
    row: InboxRaw,
    done_at: Option<i64>,
}

impl DeadRaw {
    pub(super) fn typed(self) -> StoreResult<DeadLetter> {
        let row = self.row.typed()?;
        Ok(DeadLetter {
            dead_at: self.done_at.unwrap_or(row.received_at),
            row,
        })
    }
}

/// A transcript row as stored ([`MESSAGE_COLS`]): role text, JSON lists, integer flags.
#[derive(sqlx::FromRow)]
pub(super) struct MessageRaw {
    id: i64,
    session_id: SessionId,
    role: String,
    content: String,
    api_content: Option<String>,
    tool_calls: Option<String>,
    tool_call_id: Option<String>,
    tool_name: Option<String>,
    active: i64,
    compacted: i64,
    platform_message_id: Option<String>,
    media: Option<String>,
    created_at: i64,
}

impl MessageRaw {
    pub(super) fn typed(self) -> StoreResult<StoredMessage> {
        let tool_calls: Vec<ToolCall> = match self.tool_calls {
            Some(s) if !s.is_empty() => serde_json::from_str(&s)?,
            _ => Vec::new(),
        };
        let media: Vec<Attachment> = match self.media {
            Some(s) if !s.is_empty() => serde_json::from_str(&s)?,
            _ => Vec::new(),
        };
        let role = Role::parse(&self.role).ok_or_else(|| {
            StoreError::other(format!("unknown role {:?} in messages", self.role))
        })?;
        Ok(StoredMessage {
            id: self.id,
            session_id: self.session_id,
            role,
            content: self.content,
            api_content: self.api_content,
            tool_calls,
            tool_call_id: self.tool_call_id,
            tool_name: self.tool_name,
            active: self.active != 0,
            compacted: self.compacted != 0,
            platform_message_id: self.platform_message_id,
            media,
            created_at: self.created_at,
        })
    }
}

pub(super) fn media_json(m: &NewMessage) -> Option<String> {
    if m.media.is_empty() {
        None
    } else {
        serde_json::to_string(&m.media).ok()
    }
}

pub(super) fn tool_calls_json(m: &NewMessage) -> Option<String> {
    if m.tool_calls.is_empty() {
        None
    } else {
        serde_json::to_string(&m.tool_calls).ok()
    }
}

/// A write aimed at a session of another lane than the lease's: a caller bug, never retried.
pub(super) fn wrong_lane(session_id: &str, lane: &str, lease: &Lease) -> StoreError {
    StoreError::other(format!(
        "session {session_id} belongs to lane {lane}, not to the lease's lane {}",
        lease.name
    ))
}

/// Words of a search, each with whether it ends in `*` (a prefix: `hel*` finds "hello").
fn search_words(q: &str) -> impl Iterator<Item = (&str, bool)> {
    q.split_whitespace()
        .map(|w| match w.strip_suffix('*') {
            Some(stem) => (stem.trim_end_matches('*'), true),
            None => (w, false),
        })
        .filter(|(w, _)| !w.is_empty())
}

/// Turns free text into an FTS5 query that cannot be a syntax error: every word quoted, all
/// words required, a word ending in `*` a prefix (`"hel"*`).
pub(super) fn fts5_query(q: &str) -> String {
    search_words(q)
        .map(|(w, prefix)| {
            let star = if prefix { "*" } else { "" };
            format!("\"{}\"{star}", w.replace('"', "\"\""))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The same for Postgres's `to_tsquery`: every word a quoted lexeme, all required (`&`), a
/// word ending in `*` a prefix (`'hel':*`). Quoting keeps `&`, `|`, `!` and `:` literal.
pub(super) fn pg_tsquery(q: &str) -> String {
    search_words(q)
        .map(|(w, prefix)| {
            let star = if prefix { ":*" } else { "" };
            format!("'{}'{star}", w.replace('\\', "\\\\").replace('\'', "''"))
        })
        .collect::<Vec<_>>()
        .join(" & ")
}

/// A database migrated by a newer release: `serve`, `migrate` and `doctor` all refuse it with
/// these words, since running an older binary against a newer schema risks writing rows the
/// newer release cannot read.
pub fn unknown_migrations_message(versions: &[i64]) -> String {
    let list = versions
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "the database has migration {list} applied, which this binary does not know: a newer \
         Herald release migrated it; run that release (or a newer one), not this one"
    )
}

pub(super) fn refuse_unknown(versions: Vec<i64>) -> StoreResult<()> {
    if versions.is_empty() {
        Ok(())
    } else {
        Err(StoreError::other(unknown_migrations_message(&versions)))
    }
}

/// `platform IN (…)` for the outbox claim, so one statement claims for every platform this
/// replica sends to. The names are inlined, not bound, because the two dialects bind lists
/// differently; they come from `Platform::as_str` and anything else is refused here.
pub(super) fn platform_filter(platforms: &[String]) -> StoreResult<String> {
    if let Some(bad) = platforms
        .iter()
        .find(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_lowercase()))
    {
        return Err(StoreError::other(format!("invalid platform name {bad:?}")));
    }
    let names: Vec<String> = platforms.iter().map(|p| format!("'{p}'")).collect();
    Ok(format!("o.platform IN ({})", names.join(", ")))
}

/// The outbox claim's rows: every outbox row beside its lane's first *blocking* row — a claim
/// still in flight, or a retry not yet due — so that a row is claimed only when nothing earlier
/// in its lane blocks it (a lane's chunks go out in order). The blocking rows are found once
/// per claim, over the open rows alone (`outbox_status`), not once per candidate: a
/// correlated "no earlier blocking row" check visited a lane's whole history of sent rows on
/// SQLite, and made Postgres's cached plan rescan every open row for each candidate (9.5 ms
/// per claim at 100 chats).
/// A claim is dead when it expired, or when its holder's replica lease (`replica:<holder>`)
/// expired: a crashed replica's claims come back within the replica lease's TTL instead of
/// the whole claim TTL. A holder without a replica lease row keeps its claim until expiry.
const OUTBOX_CLAIM_FROM: &str = "outbox o LEFT JOIN (SELECT e.lane, MIN(e.id) AS first \
     FROM outbox e WHERE e.status IN ('pending', 'sending') \
       AND ((e.status = 'sending' AND e.claim_until >= $1 AND NOT EXISTS (SELECT 1 FROM leases r \
           WHERE r.name = 'replica:' || e.claimed_by AND r.expires_at < $1)) \
         OR (e.status = 'pending' AND e.next_attempt_at > $1)) \
     GROUP BY e.lane) b ON b.lane = o.lane";

/// The claim's row filter over [`OUTBOX_CLAIM_FROM`]: due, and before its lane's first
/// blocking row.
const OUTBOX_CLAIMABLE: &str = "((o.status = 'pending' AND o.next_attempt_at <= $1) \
       OR (o.status = 'sending' AND (o.claim_until < $1 OR EXISTS (SELECT 1 FROM leases r \
         WHERE r.name = 'replica:' || o.claimed_by AND r.expires_at < $1)))) \
     AND (b.first IS NULL OR o.id < b.first)";

/// The outbox claim of both dialects: up to `$4` claimable rows of `platforms` by id, marked
/// `sending` under `$2` until `$3`, `$1` being now. `lock` ends the inner select (Postgres
/// locks the rows it picks; SQLite has one writer).
pub(super) fn claim_sql(platforms: &[String], lock: &str) -> StoreResult<String> {
    Ok(format!(
        "UPDATE outbox SET status = 'sending', claimed_by = $2, claim_until = $3 \
         WHERE id IN (SELECT o.id FROM {OUTBOX_CLAIM_FROM} WHERE {} AND {OUTBOX_CLAIMABLE} \
           ORDER BY o.id LIMIT CAST($4 AS BIGINT){lock}) RETURNING {OUTBOX_COLS}",
        platform_filter(platforms)?,
    ))
}
