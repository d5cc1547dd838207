//! Store methods of the context engine: the usage anchor and the compaction breaker kept on the
//! session row, compaction together with that state in one transaction, single-message reads
//! for paging, and importing a whole transcript as a closed session.
//!
//! A separate trait (a supertrait of [`super::Store`]) so that other pieces add their own
//! store methods the same way without touching one long trait. One impl for both backends
//! ([`super::Pools`], statements through `db.rs`). It must not decide anything: the rules (when to
//! compact, when the breaker trips) are in `agent::context`.

use async_trait::async_trait;
use serde::Serialize;

use super::common::{self, MessageRaw};
use super::db::{self, Tx};
use super::text::clean;
use super::transcript::compact_in;
use super::tx::{check_lease, check_session_write, insert_message, set_flags};
use super::types::{Lease, NewMessage, Session, SessionId, StoredMessage};
use super::{Pools, StoreResult};

/// The context state of one session, as stored on its row. A restart reads it back, so
/// nothing here can be reset by restarting the process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ContextRow {
    /// Consecutive compactions the next billed reading judged ineffective.
    pub compaction_strikes: i64,
    /// Left for provider-fallback accounting; the context engine reads it but never writes it.
    pub fallback_streak: i64,
    /// Milliseconds the breaker has blocked a wanted compaction, measured on monotonic clocks
    /// (see `agent::context::breaker`); `None` when not blocking.
    pub breaker_blocked_ms: Option<i64>,
    /// The process that took the last reading of a blocked check, and that reading (ms of
    /// its monotonic clock).
    pub breaker_clock: Option<String>,
    pub breaker_clock_ms: Option<i64>,
    pub cooldown_until: Option<i64>,
    /// Billed prompt tokens of the last request whose prompt fit.
    pub prompt_tokens_anchor: Option<i64>,
    /// Fingerprint of the last message that request carried (see `agent::context`).
    pub anchor_fingerprint: Option<String>,
}

/// One message of an imported transcript, with the flags it had where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedMessage {
    pub message: NewMessage,
    pub active: bool,
    pub compacted: bool,
}

#[async_trait]
pub trait ContextStore: Send + Sync {
    /// The session's context state; `None` when there is no such session.
    async fn context_get(&self, session_id: &SessionId) -> StoreResult<Option<ContextRow>>;
    /// Writes the state columns the engine owns (strikes, the block and its clock, anchor,
    /// fingerprint), lease-checked.
    async fn context_set(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        row: &ContextRow,
    ) -> StoreResult<()>;
    /// [`super::TranscriptStore::compact`] and [`ContextStore::context_set`] in one transaction:
    /// a crash cannot leave a compaction whose effectiveness is never judged.
    async fn compact_with_state(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        flip_ids: &[i64],
        insert: &[NewMessage],
        row: &ContextRow,
    ) -> StoreResult<Vec<i64>>;
    /// One message by id, whatever its flags (paging a spilled tool result back in).
    async fn message_get(&self, id: i64) -> StoreResult<Option<StoredMessage>>;
    /// Creates `session` already closed (`end_reason`) with `messages` and their flags, in one
    /// transaction under the lease of the session's lane. Returns the new message ids.
    async fn session_import(
        &self,
        lease: &Lease,
        session: &Session,
        end_reason: &str,
        messages: &[ImportedMessage],
    ) -> StoreResult<Vec<i64>>;
}

#[async_trait]
impl<S: Pools> ContextStore for S {
    async fn context_get(&self, session_id: &SessionId) -> StoreResult<Option<ContextRow>> {
        type Cols = (
            i64,
            i64,
            Option<i64>,
            Option<String>,
            Option<i64>,
            Option<i64>,
            Option<i64>,
            Option<String>,
        );
        let row: Option<Cols> = db::query(
            "SELECT compaction_strikes, fallback_streak, breaker_blocked_ms, \
                     breaker_clock, breaker_clock_ms, cooldown_until, prompt_tokens_anchor, \
                     anchor_fingerprint FROM sessions WHERE id = $1",
        )
        .bind(session_id)
        .fetch_optional(self.reader())
        .await?;
        Ok(row.map(|(s, f, b, bc, bcm, c, a, fp)| ContextRow {
            compaction_strikes: s,
            fallback_streak: f,
            breaker_blocked_ms: b,
            breaker_clock: bc,
            breaker_clock_ms: bcm,
            cooldown_until: c,
            prompt_tokens_anchor: a,
            anchor_fingerprint: fp,
        }))
    }

    async fn context_set(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        row: &ContextRow,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        check_session_write(&mut tx, lease, session_id).await?;
        context_write(&mut tx, session_id, row).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn compact_with_state(
        &self,
        lease: &Lease,
        session_id: &SessionId,
        flip_ids: &[i64],
        insert: &[NewMessage],
        row: &ContextRow,
    ) -> StoreResult<Vec<i64>> {
        let mut tx = self.begin().await?;
        let ids = compact_in(&mut tx, self.now_ms(), lease, session_id, flip_ids, insert).await?;
        context_write(&mut tx, session_id, row).await?;
        tx.commit().await?;
        Ok(ids)
    }

    async fn message_get(&self, id: i64) -> StoreResult<Option<StoredMessage>> {
        let sql = format!(
            "SELECT {} FROM messages WHERE id = $1",
            common::MESSAGE_COLS
        );
        let row: Option<MessageRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.reader())
            .await?;
        row.map(MessageRaw::typed).transpose()
    }

    async fn session_import(
        &self,
        lease: &Lease,
        s: &Session,
        end_reason: &str,
        messages: &[ImportedMessage],
    ) -> StoreResult<Vec<i64>> {
        if s.lane.as_str() != lease.name {
            return Err(common::wrong_lane(&s.id, s.lane.as_str(), lease));
        }
        let mut tx = self.begin().await?;
        check_lease(&mut tx, lease).await?;
        db::query(
            "INSERT INTO sessions (id, lane, parent_id, started_at, ended_at, end_reason, \
                     system_prompt, model, agent) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&s.id)
        .bind(s.lane.as_str())
        .bind(&s.parent_id)
        .bind(s.started_at)
        .bind(self.now_ms())
        .bind(clean(end_reason))
        .bind(clean(&s.system_prompt))
        .bind(clean(&s.model))
        .bind(clean(&s.agent))
        .execute(&mut tx)
        .await?;
        let mut ids = Vec::with_capacity(messages.len());
        let (mut compacted, mut retracted) = (Vec::new(), Vec::new());
        for m in messages {
            let id = insert_message(&mut tx, self.now_ms(), &lease.name, &s.id, None, &m.message)
                .await?;
            match (m.active, m.compacted) {
                (true, _) => {}
                (false, true) => compacted.push(id),
                (false, false) => retracted.push(id),
            }
            ids.push(id);
        }
        set_flags(&mut tx, &s.id, &compacted, 1).await?;
        set_flags(&mut tx, &s.id, &retracted, 0).await?;
        tx.commit().await?;
        Ok(ids)
    }
}

/// Writes the session's context state inside the caller's transaction.
pub(super) async fn context_write(
    tx: &mut Tx,
    session_id: &SessionId,
    row: &ContextRow,
) -> StoreResult<()> {
    db::query(
        "UPDATE sessions SET compaction_strikes = $1, breaker_blocked_ms = $2, \
                 prompt_tokens_anchor = $3, anchor_fingerprint = $4, breaker_clock = $6, \
                 breaker_clock_ms = $7 WHERE id = $5",
    )
    .bind(row.compaction_strikes)
    .bind(row.breaker_blocked_ms)
    .bind(row.prompt_tokens_anchor)
    .bind(&row.anchor_fingerprint)
    .bind(session_id)
    .bind(&row.breaker_clock)
    .bind(row.breaker_clock_ms)
    .execute(&mut *tx)
    .await?;
    Ok(())
}
