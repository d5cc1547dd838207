//! The outbox after a claim: marking a row sent, retrying or failing it, releasing a claim,
//! the read views, and rows written outside a turn.
//!
//! The claim itself (`outbox_claim`) differs per dialect and stays on [`super::Store`] in each
//! backend; turns and skips write their rows in their own transactions through the idempotent
//! `insert_outbox` helper.
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. One impl for
//! both backends ([`super::Pools`], statements through `db.rs`).

use async_trait::async_trait;

use super::common;
use super::db;
use super::text::clean;
use super::tx::{check_lease, insert_outbox};
use super::types::{Lease, NewOutbox, OutboxCounts, OutboxRow, ReplyKey};
use super::{Pools, StoreResult};
use crate::domain::{Attachment, LaneKey, Platform};

/// What a platform reported about a message it took ([`OutboxStore::outbox_report`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryReport {
    Sent,
    Delivered,
    Read,
    /// The platform gave up delivering it; the reason names its code.
    Failed(String),
}

impl DeliveryReport {
    pub fn as_str(&self) -> &'static str {
        match self {
            DeliveryReport::Sent => "sent",
            DeliveryReport::Delivered => "delivered",
            DeliveryReport::Read => "read",
            DeliveryReport::Failed(_) => "failed",
        }
    }

    /// The order states move in (a late `delivered` never follows `read`).
    pub fn rank(&self) -> i64 {
        match self {
            DeliveryReport::Sent => 1,
            DeliveryReport::Delivered => 2,
            DeliveryReport::Read => 3,
            DeliveryReport::Failed(_) => 9,
        }
    }
}

#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Counts one send attempt of a row `holder` claimed, before it is sent: a sender that
    /// crashes or is killed while sending it has counted it too. Returns the new count, or
    /// `None` when the claim is no longer `holder`'s (the row must not be sent then).
    async fn outbox_start(&self, id: i64, holder: &str) -> StoreResult<Option<i64>>;
    async fn outbox_mark_sent(&self, id: i64, platform_message_id: &str) -> StoreResult<()>;
    /// Puts a row `holder` claimed back: to retry at `next_attempt_at`, or `failed` for good.
    /// The attempt was counted by [`OutboxStore::outbox_start`].
    /// Only a row still `sending` under `holder`'s claim changes: a sender whose claim expired
    /// meanwhile can bring back neither a row another sender delivered nor one another sender
    /// has claimed and is sending (either would go out twice).
    async fn outbox_mark_retry(
        &self,
        id: i64,
        holder: &str,
        error: &str,
        next_attempt_at: i64,
        give_up: bool,
    ) -> StoreResult<()>;
    /// Releases `holder`'s claim without counting an attempt (nothing when the claim has
    /// passed to another sender, as for [`OutboxStore::outbox_mark_retry`]).
    async fn outbox_release(&self, id: i64, holder: &str) -> StoreResult<()>;
    async fn outbox_for_inbox(&self, inbox_id: i64) -> StoreResult<Vec<OutboxRow>>;
    async fn outbox_counts(&self) -> StoreResult<OutboxCounts>;
    /// The file whose SHA-256 is `sha` (64 lowercase hex digits; anything else finds nothing)
    /// as an outbox row of `lane` sends it: the web chat serves a file only to its lane.
    async fn outbox_file(&self, lane: &LaneKey, sha: &str) -> StoreResult<Option<Attachment>>;
    async fn outbox_recent(&self, limit: i64) -> StoreResult<Vec<OutboxRow>>;
    /// Rows given up for good (`failed`: refused, out of attempts, or abandoned after sends
    /// that crashed), newest first.
    async fn outbox_failed(&self, limit: i64) -> StoreResult<Vec<OutboxRow>>;
    /// Outbox rows written outside a turn (notices), not tied to a transcript.
    async fn outbox_enqueue(&self, rows: &[NewOutbox]) -> StoreResult<()>;
    /// Closes a lane's control event as skipped and queues `rows`, in one transaction that
    /// checks the lane's lease first: a worker that lost its lease queues nothing.
    async fn inbox_skip_leased(
        &self,
        lease: &Lease,
        inbox_id: i64,
        note: &str,
        rows: &[NewOutbox],
    ) -> StoreResult<()>;
    /// A chunk failed for good: the later chunks of the same reply (the rows of its lane stored
    /// with `reply_key`, after it, not sent yet) fail too, unsent, and
    /// `notice` (when given, and the reply has a hole: chunks were stopped or the failed one was
    /// not the first) is queued in their place, in one transaction. Returns how many chunks
    /// were stopped.
    async fn outbox_fail_reply(
        &self,
        failed: &OutboxRow,
        reply_key: &ReplyKey,
        notice: Option<&NewOutbox>,
    ) -> StoreResult<u64>;
    /// A platform's report on a message it took (`platform_message_id`; WhatsApp's status
    /// callbacks), naming the row by its outbox key where the platform echoes one back: a row
    /// of `key` not recorded as sent yet is marked sent with that id (a crash between the
    /// platform's acceptance and `mark_sent` then sends nothing twice); the row's `delivery`
    /// moves forward (`sent` < `delivered` < `read`); `Failed` fails the row with its reason,
    /// sent or not. Only rows of `platform`. Returns whether a row changed.
    async fn outbox_report(
        &self,
        platform: Platform,
        key: Option<&str>,
        platform_message_id: &str,
        report: &DeliveryReport,
    ) -> StoreResult<bool>;
}

#[async_trait]
impl<S: Pools> OutboxStore for S {
    async fn outbox_start(&self, id: i64, holder: &str) -> StoreResult<Option<i64>> {
        let n: Option<(i64,)> = db::query(
            "UPDATE outbox SET attempts = attempts + 1 \
                 WHERE id = $1 AND status = 'sending' AND claimed_by = $2 RETURNING attempts",
        )
        .bind(id)
        .bind(holder)
        .fetch_optional(self.writer())
        .await?;
        Ok(n.map(|(n,)| n))
    }

    async fn outbox_mark_sent(&self, id: i64, platform_message_id: &str) -> StoreResult<()> {
        db::query(
            "UPDATE outbox SET status = 'sent', platform_message_id = $1, sent_at = $2, \
                 claimed_by = NULL, claim_until = NULL WHERE id = $3",
        )
        .bind(platform_message_id)
        .bind(self.now_ms())
        .bind(id)
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn outbox_mark_retry(
        &self,
        id: i64,
        holder: &str,
        error: &str,
        next_attempt_at: i64,
        give_up: bool,
    ) -> StoreResult<()> {
        db::query(
            "UPDATE outbox SET status = $1, last_error = $2, next_attempt_at = $3, \
                 claimed_by = NULL, claim_until = NULL \
                 WHERE id = $4 AND status = 'sending' AND claimed_by = $5",
        )
        .bind(if give_up { "failed" } else { "pending" })
        .bind(clean(error))
        .bind(next_attempt_at)
        .bind(id)
        .bind(holder)
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn outbox_release(&self, id: i64, holder: &str) -> StoreResult<()> {
        db::query(
            "UPDATE outbox SET status = 'pending', claimed_by = NULL, claim_until = NULL \
                 WHERE id = $1 AND status = 'sending' AND claimed_by = $2",
        )
        .bind(id)
        .bind(holder)
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn outbox_for_inbox(&self, inbox_id: i64) -> StoreResult<Vec<OutboxRow>> {
        let sql = format!(
            "SELECT {} FROM outbox WHERE inbox_id = $1 ORDER BY chunk_index, id",
            common::OUTBOX_COLS
        );
        Ok(db::query(sqlx::AssertSqlSafe(sql))
            .bind(inbox_id)
            .fetch_all(self.reader())
            .await?)
    }

    async fn outbox_counts(&self) -> StoreResult<OutboxCounts> {
        let rows: Vec<(String, i64)> =
            db::query("SELECT status, COUNT(*) FROM outbox GROUP BY status")
                .fetch_all(self.reader())
                .await?;
        let mut c = OutboxCounts::default();
        for (status, n) in rows {
            match status.as_str() {
                "pending" => c.pending = n,
                "sending" => c.sending = n,
                "sent" => c.sent = n,
                "failed" => c.failed = n,
                _ => {}
            }
        }
        Ok(c)
    }

    async fn outbox_file(
        &self,
        lane: &LaneKey,
        sha: &str,
    ) -> StoreResult<Option<crate::domain::Attachment>> {
        let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        if sha.len() != 64 || !sha.bytes().all(hex) {
            return Ok(None);
        }
        let rows: Vec<(String,)> = db::query(
            "SELECT media FROM outbox WHERE lane = $1 AND media LIKE $2 ORDER BY id DESC LIMIT 5",
        )
        .bind(lane.as_str())
        .bind(format!("%{sha}%"))
        .fetch_all(self.reader())
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(json,)| serde_json::from_str::<crate::domain::Attachment>(&json).ok())
            .find(|a| a.file_sha() == Some(sha)))
    }

    async fn outbox_recent(&self, limit: i64) -> StoreResult<Vec<OutboxRow>> {
        let sql = format!(
            "SELECT {} FROM outbox ORDER BY id DESC LIMIT CAST($1 AS BIGINT)",
            common::OUTBOX_COLS
        );
        Ok(db::query(sqlx::AssertSqlSafe(sql))
            .bind(limit)
            .fetch_all(self.reader())
            .await?)
    }

    async fn outbox_failed(&self, limit: i64) -> StoreResult<Vec<OutboxRow>> {
        let sql = format!(
            "SELECT {} FROM outbox WHERE status = 'failed' ORDER BY id DESC LIMIT CAST($1 AS BIGINT)",
            common::OUTBOX_COLS
        );
        Ok(db::query(sqlx::AssertSqlSafe(sql))
            .bind(limit)
            .fetch_all(self.reader())
            .await?)
    }

    async fn outbox_enqueue(&self, rows: &[NewOutbox]) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        for r in rows {
            insert_outbox(&mut tx, self.now_ms(), r).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn inbox_skip_leased(
        &self,
        lease: &Lease,
        inbox_id: i64,
        note: &str,
        rows: &[NewOutbox],
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        check_lease(&mut tx, lease).await?;
        db::query("UPDATE inbox SET status = 'skipped', note = $1, done_at = $2 WHERE id = $3")
            .bind(clean(note))
            .bind(self.now_ms())
            .bind(inbox_id)
            .execute(&mut tx)
            .await?;
        for r in rows {
            insert_outbox(&mut tx, self.now_ms(), r).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn outbox_fail_reply(
        &self,
        failed: &OutboxRow,
        reply_key: &ReplyKey,
        notice: Option<&NewOutbox>,
    ) -> StoreResult<u64> {
        let mut tx = self.begin().await?;
        let stopped = db::query(
            "UPDATE outbox SET status = 'failed', last_error = $1, claimed_by = NULL, \
                 claim_until = NULL WHERE lane = $2 AND id > $3 AND chunk_index > $4 \
                 AND status IN ('pending', 'sending') AND reply_key = $5",
        )
        .bind("not sent: an earlier chunk of this reply failed for good")
        .bind(failed.lane.as_str())
        .bind(failed.id)
        .bind(failed.chunk_index)
        .bind(reply_key.as_str())
        .execute(&mut tx)
        .await?;
        // Only a reply with a hole gets the notice: a first chunk that failed with nothing
        // after it leaves nothing half-said.
        if let Some(n) = notice.filter(|_| stopped > 0 || failed.chunk_index > 0) {
            insert_outbox(&mut tx, self.now_ms(), n).await?;
        }
        tx.commit().await?;
        Ok(stopped)
    }

    async fn outbox_report(
        &self,
        platform: Platform,
        key: Option<&str>,
        platform_message_id: &str,
        report: &DeliveryReport,
    ) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        let mut changed = 0;
        if let Some(key) = key {
            changed += db::query(
                "UPDATE outbox SET status = 'sent', platform_message_id = $1, sent_at = $2, \
                     claimed_by = NULL, claim_until = NULL \
                     WHERE platform = $3 AND idem_key = $4 AND status IN ('pending', 'sending')",
            )
            .bind(platform_message_id)
            .bind(self.now_ms())
            .bind(platform.as_str())
            .bind(key)
            .execute(&mut tx)
            .await?;
        }
        let rank = "COALESCE(CASE delivery WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 \
                    WHEN 'read' THEN 3 WHEN 'failed' THEN 9 END, 0)";
        changed +=
            match report {
                DeliveryReport::Failed(why) => db::query(
                    "UPDATE outbox SET status = 'failed', delivery = 'failed', last_error = $1, \
                         claimed_by = NULL, claim_until = NULL \
                         WHERE platform = $2 AND platform_message_id = $3 \
                         AND (delivery IS NULL OR delivery <> 'failed')",
                )
                .bind(clean(why))
                .bind(platform.as_str())
                .bind(platform_message_id)
                .execute(&mut tx)
                .await?,
                _ => {
                    let sql = format!(
                        "UPDATE outbox SET delivery = $1 WHERE platform = $2 \
                         AND platform_message_id = $3 AND {rank} < CAST($4 AS BIGINT)"
                    );
                    db::query(sqlx::AssertSqlSafe(sql))
                        .bind(report.as_str())
                        .bind(platform.as_str())
                        .bind(platform_message_id)
                        .bind(report.rank())
                        .execute(&mut tx)
                        .await?
                }
            };
        tx.commit().await?;
        Ok(changed > 0)
    }
}
