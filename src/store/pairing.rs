//! Pairing requests and the store-kept allowlist they feed. A separate trait (a supertrait of
//! `Store`) so that the feature's SQL stays in one file; one impl for both backends
//! ([`super::Pools`], statements through `db.rs`).

use async_trait::async_trait;
use serde::Serialize;

use super::db;
use super::text::clean;
use super::tx::insert_outbox;
use super::{Pools, StoreError, StoreResult};

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct PairingRequest {
    pub platform: String,
    pub code: String,
    pub sender_id: String,
    pub sender_name: String,
    pub chat_id: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub last_reply_at: i64,
    #[sqlx(try_from = "String")]
    pub status: PairingStatus,
}

/// Where a pairing code stands (the `status` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PairingStatus {
    /// Waiting for the operator.
    Pending,
    Approved,
    /// Not approved in time.
    Expired,
    /// Pushed out by newer codes over `pairing.max_pending`.
    Evicted,
}

impl PairingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PairingStatus::Pending => "pending",
            PairingStatus::Approved => "approved",
            PairingStatus::Expired => "expired",
            PairingStatus::Evicted => "evicted",
        }
    }
}

impl TryFrom<String> for PairingStatus {
    type Error = super::StoreError;
    fn try_from(s: String) -> Result<PairingStatus, super::StoreError> {
        [
            PairingStatus::Pending,
            PairingStatus::Approved,
            PairingStatus::Expired,
            PairingStatus::Evicted,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
        .ok_or_else(|| super::StoreError::other(format!("unknown pairing status {s:?}")))
    }
}

/// A sender approved through pairing (`herald pairing list`).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ApprovedSender {
    pub platform: String,
    pub sender_id: String,
    pub sender_name: String,
    pub approved_at: i64,
    pub code: Option<String>,
}

/// What the person is told when the operator approves them.
pub const APPROVED_NOTICE: &str = "You are approved: you can talk to me now.";
/// Said after [`APPROVED_NOTICE`] when messages they sent while waiting are answered now.
pub const APPROVED_REQUEUED: &str = " I am answering what you wrote.";
/// The most messages of a sender, sent while their code waited, that approval answers.
pub(super) const REQUEUE_MAX: usize = 5;

/// An unknown sender asking for access, and the limits that apply.
#[derive(Debug, Clone)]
pub struct PairingAsk<'a> {
    pub platform: &'a str,
    pub sender_id: &'a str,
    pub sender_name: &'a str,
    pub chat_id: &'a str,
    /// The code to issue if a new one is needed.
    pub new_code: &'a str,
    pub ttl_ms: i64,
    pub remind_every_ms: i64,
    pub max_pending: i64,
}

/// What `pairing_request` decided for an unknown sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairingOutcome {
    /// A new code was issued: tell the person.
    Issued(String),
    /// The sender already has a live code; `remind` says whether to repeat it now (rate limit).
    Pending { code: String, remind: bool },
    /// A new code was issued in place of the platform's oldest pending one (the cap was
    /// reached): the evicted sender's code no longer works; they get a new one if they write.
    IssuedEvicting {
        code: String,
        evicted_sender: String,
        evicted_code: String,
    },
    /// No code may be pending at all (`max_pending` is 0): say nothing.
    Full,
}

#[async_trait]
pub trait PairingStore {
    async fn sender_approved(&self, platform: &str, sender_id: &str) -> StoreResult<bool>;
    /// Issues or reminds a code for an unknown sender, honouring expiry, the reminder interval
    /// and the cap on pending codes per platform: at the cap, the platform's oldest pending
    /// code is evicted, so a run of throwaway accounts cannot stop onboarding.
    async fn pairing_request(&self, ask: &PairingAsk<'_>) -> StoreResult<PairingOutcome>;
    /// Approves a pending, unexpired code; returns the request. `NotFound` otherwise. In the
    /// same transaction, the person is told (an outbox row in their chat) and the messages
    /// they sent while their code waited (refused by the auth hook) are queued again, so they
    /// are answered now.
    async fn pairing_approve(&self, platform: &str, code: &str) -> StoreResult<PairingRequest>;
    /// Senders approved through pairing, oldest first.
    async fn senders_approved(&self) -> StoreResult<Vec<ApprovedSender>>;
    async fn pairing_pending(&self) -> StoreResult<Vec<PairingRequest>>;
    async fn sender_revoke(&self, platform: &str, sender_id: &str) -> StoreResult<bool>;
}

pub(super) const COLS: &str =
    "platform, code, sender_id, sender_name, chat_id, created_at, expires_at, \
     last_reply_at, status";

#[async_trait]
impl<S: Pools> PairingStore for S {
    async fn sender_approved(&self, platform: &str, sender_id: &str) -> StoreResult<bool> {
        let row: Option<(String,)> = db::query(
            "SELECT sender_id FROM approved_senders WHERE platform = $1 AND sender_id = $2",
        )
        .bind(platform)
        .bind(sender_id)
        .fetch_optional(self.reader())
        .await?;
        Ok(row.is_some())
    }

    async fn pairing_request(&self, ask: &PairingAsk<'_>) -> StoreResult<PairingOutcome> {
        let PairingAsk {
            platform,
            sender_id,
            sender_name,
            chat_id,
            new_code,
            ttl_ms,
            remind_every_ms,
            max_pending,
        } = *ask;
        let now = self.now_ms();
        let mut tx = self.begin().await?;
        db::query(
                    "UPDATE pairing_requests SET status = 'expired' WHERE status = 'pending' AND expires_at < $1",
                )
                .bind(now)
                .execute(&mut tx)
                .await?;
        let live: Option<(String, i64)> = db::query(
            "SELECT code, last_reply_at FROM pairing_requests \
                     WHERE platform = $1 AND sender_id = $2 AND status = 'pending'",
        )
        .bind(platform)
        .bind(sender_id)
        .fetch_optional(&mut tx)
        .await?;
        let outcome = if let Some((code, last)) = live {
            let remind = now - last >= remind_every_ms;
            if remind {
                db::query(
                            "UPDATE pairing_requests SET last_reply_at = $1 WHERE platform = $2 AND code = $3",
                        )
                        .bind(now)
                        .bind(platform)
                        .bind(&code)
                        .execute(&mut tx)
                        .await?;
            }
            PairingOutcome::Pending { code, remind }
        } else {
            let (pending,): (i64,) = db::query(
                "SELECT COUNT(*) FROM pairing_requests WHERE platform = $1 AND status = 'pending'",
            )
            .bind(platform)
            .fetch_one(&mut tx)
            .await?;
            let mut evicted = None;
            let over = if max_pending < 1 {
                0
            } else {
                pending - max_pending + 1
            };
            for _ in 0..over.max(0) {
                let oldest: Option<(String, String)> = db::query(
                    "SELECT code, sender_id FROM pairing_requests WHERE platform = $1 \
                             AND status = 'pending' ORDER BY created_at, code LIMIT 1",
                )
                .bind(platform)
                .fetch_optional(&mut tx)
                .await?;
                let Some((code, sender)) = oldest else { break };
                db::query(
                            "UPDATE pairing_requests SET status = 'evicted' WHERE platform = $1 AND code = $2",
                        )
                        .bind(platform)
                        .bind(&code)
                        .execute(&mut tx)
                        .await?;
                evicted = Some((code, sender));
            }
            if max_pending < 1 {
                PairingOutcome::Full
            } else {
                db::query(
                            "INSERT INTO pairing_requests (platform, code, sender_id, sender_name, chat_id, \
                             created_at, expires_at, last_reply_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $6)",
                        )
                        .bind(platform)
                        .bind(new_code)
                        .bind(sender_id)
                        .bind(clean(sender_name))
                        .bind(chat_id)
                        .bind(now)
                        .bind(now + ttl_ms)
                        .execute(&mut tx)
                        .await?;
                match evicted {
                    None => PairingOutcome::Issued(new_code.to_string()),
                    Some((evicted_code, evicted_sender)) => PairingOutcome::IssuedEvicting {
                        code: new_code.to_string(),
                        evicted_sender,
                        evicted_code,
                    },
                }
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    async fn pairing_approve(&self, platform: &str, code: &str) -> StoreResult<PairingRequest> {
        let now = self.now_ms();
        let mut tx = self.begin().await?;
        let sql = format!(
            "UPDATE pairing_requests SET status = 'approved' WHERE platform = $1 AND code = $2 \
                     AND status = 'pending' AND expires_at >= $3 RETURNING {COLS}"
        );
        let req: Option<PairingRequest> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(platform)
            .bind(code)
            .bind(now)
            .fetch_optional(&mut tx)
            .await?;
        let Some(req) = req else {
            return Err(StoreError::NotFound(format!(
                "no pending, unexpired pairing code {code} for {platform}"
            )));
        };
        db::query(
            "INSERT INTO approved_senders (platform, sender_id, sender_name, approved_at, code) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (platform, sender_id) DO NOTHING",
        )
        .bind(platform)
        .bind(&req.sender_id)
        .bind(clean(&req.sender_name))
        .bind(now)
        .bind(code)
        .execute(&mut tx)
        .await?;
        // The messages the auth hook refused while the code waited (its skip note is
        // `auth: unauthorized`; closed once the code existed), this sender's in this
        // chat, newest few.
        let refused: Vec<(i64, String)> = db::query(
            "SELECT id, event FROM inbox WHERE platform = $1 AND status = 'skipped' \
                     AND note = 'auth: unauthorized' AND done_at >= $2 ORDER BY id DESC LIMIT 200",
        )
        .bind(platform)
        .bind(req.created_at)
        .fetch_all(&mut tx)
        .await?;
        let mine: Vec<i64> = refused
            .into_iter()
            .filter(|(_, ev)| {
                serde_json::from_str::<crate::domain::MessageEvent>(ev).is_ok_and(|ev| {
                    ev.sender_id == req.sender_id && ev.chat_id == req.chat_id && !ev.is_internal()
                })
            })
            .map(|(id, _)| id)
            .take(REQUEUE_MAX)
            .collect();
        // Each starts afresh: the take that ended in the auth skip was not an attempt at a
        // turn (a first start is what steering and the poison guard count from).
        for id in &mine {
            db::query(
                "UPDATE inbox SET status = 'pending', note = NULL, done_at = NULL, attempts = 0 \
                 WHERE id = $1",
            )
            .bind(id)
            .execute(&mut tx)
            .await?;
        }
        if let Some(p) = crate::domain::Platform::parse(platform) {
            let mut text = APPROVED_NOTICE.to_string();
            if !mine.is_empty() {
                text.push_str(APPROVED_REQUEUED);
            }
            let notice = super::types::NewOutbox {
                key: super::types::OutboxKey::Single(format!("pairing:{platform}:{code}")),
                lane: crate::domain::LaneKey::from_parts(platform, &req.chat_id, None),
                platform: p,
                chat_id: req.chat_id.clone(),
                thread_id: None,
                reply_to: None,
                inbox_id: None,
                chunk_index: 0,
                text,
                media: None,
            };
            insert_outbox(&mut tx, self.now_ms(), &notice).await?;
        }
        tx.commit().await?;
        Ok(req)
    }

    async fn senders_approved(&self) -> StoreResult<Vec<ApprovedSender>> {
        Ok(db::query(
            "SELECT platform, sender_id, sender_name, approved_at, code FROM approved_senders \
                     ORDER BY approved_at, platform, sender_id",
        )
        .fetch_all(self.reader())
        .await?)
    }

    async fn pairing_pending(&self) -> StoreResult<Vec<PairingRequest>> {
        let sql = format!(
            "SELECT {COLS} FROM pairing_requests WHERE status = 'pending' AND expires_at >= $1 \
                     ORDER BY created_at"
        );
        Ok(db::query(sqlx::AssertSqlSafe(sql))
            .bind(self.now_ms())
            .fetch_all(self.writer())
            .await?)
    }

    async fn sender_revoke(&self, platform: &str, sender_id: &str) -> StoreResult<bool> {
        let res = db::query("DELETE FROM approved_senders WHERE platform = $1 AND sender_id = $2")
            .bind(platform)
            .bind(sender_id)
            .execute(self.writer())
            .await?;
        Ok(res > 0)
    }
}
