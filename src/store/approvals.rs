//! Approval requests: a tool call waiting for a person, durable so that a restart resumes the
//! wait, a press on any replica answers it once, and an approved call runs at most once.
//!
//! Every transition is one conditional `UPDATE` whose `WHERE` names the state it leaves, so two
//! presses, a press racing the deadline, or two replicas see exactly one winner. Ordinary
//! generic code over `sqlx::Database` ([`super::Pools`]), one SQL text for both backends.

use std::sync::LazyLock;

use async_trait::async_trait;
use serde::Serialize;

use super::db;
use super::text::clean;

use super::{Pools, StoreError, StoreResult};
use crate::domain::LaneKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Denied,
    Expired,
    /// Approved and handed to the tool; still `running` on a later read means the process
    /// died during the call.
    Running,
    Done,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::Running => "running",
            ApprovalStatus::Done => "done",
        }
    }

    pub fn parse(s: &str) -> StoreResult<ApprovalStatus> {
        Ok(match s {
            "pending" => ApprovalStatus::Pending,
            "approved" => ApprovalStatus::Approved,
            "denied" => ApprovalStatus::Denied,
            "expired" => ApprovalStatus::Expired,
            "running" => ApprovalStatus::Running,
            "done" => ApprovalStatus::Done,
            other => {
                return Err(StoreError::other(format!(
                    "unknown approval status {other:?}"
                )))
            }
        })
    }
}

/// A request to open (or find again, after a restart).
#[derive(Debug, Clone)]
pub struct NewApproval {
    /// Random, unguessable: it travels in button data.
    pub id: String,
    pub lane: LaneKey,
    pub inbox_id: i64,
    pub call_index: i64,
    pub call_hash: String,
    pub tool: String,
    pub arguments: String,
    pub person: String,
    pub platform: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub deadline: i64,
    pub now: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRow {
    pub id: String,
    pub lane: LaneKey,
    pub inbox_id: i64,
    pub call_index: i64,
    pub tool: String,
    pub arguments: String,
    pub person: String,
    pub platform: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub status: ApprovalStatus,
    pub decided_by: Option<String>,
    pub deadline: i64,
    pub prompt_message_id: Option<String>,
    #[serde(skip)]
    pub result: Option<String>,
    pub created_at: i64,
}

#[derive(sqlx::FromRow)]
struct Raw {
    id: String,
    lane: String,
    inbox_id: i64,
    call_index: i64,
    tool: String,
    arguments: String,
    person: String,
    platform: String,
    chat_id: String,
    thread_id: Option<String>,
    status: String,
    decided_by: Option<String>,
    deadline: i64,
    prompt_message_id: Option<String>,
    result: Option<String>,
    created_at: i64,
}

impl Raw {
    fn typed(self) -> StoreResult<ApprovalRow> {
        Ok(ApprovalRow {
            status: ApprovalStatus::parse(&self.status)?,
            id: self.id,
            lane: LaneKey::parse(&self.lane),
            inbox_id: self.inbox_id,
            call_index: self.call_index,
            tool: self.tool,
            arguments: self.arguments,
            person: self.person,
            platform: self.platform,
            chat_id: self.chat_id,
            thread_id: self.thread_id,
            decided_by: self.decided_by,
            deadline: self.deadline,
            prompt_message_id: self.prompt_message_id,
            result: self.result,
            created_at: self.created_at,
        })
    }
}

/// The select of [`Raw`]'s columns; the statements built on it are made once, so each is a
/// `&'static str` like every other statement text (sqlx caches statements by text).
const SELECT: &str =
    "SELECT id, lane, inbox_id, call_index, tool, arguments, person, platform, chat_id, \
     thread_id, status, decided_by, deadline, prompt_message_id, result, created_at \
     FROM approvals ";

static BY_CALL: LazyLock<String> = LazyLock::new(|| {
    format!("{SELECT}WHERE lane = $1 AND inbox_id = $2 AND call_index = $3 AND call_hash = $4")
});
static BY_ID: LazyLock<String> = LazyLock::new(|| format!("{SELECT}WHERE id = $1"));
static PENDING_OF_EVENT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{SELECT}WHERE lane = $1 AND inbox_id = $2 AND status = 'pending' ORDER BY created_at, id"
    )
});
static PENDING: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{SELECT}WHERE status = 'pending' AND (CAST($1 AS TEXT) IS NULL OR lane = $1) \
         ORDER BY created_at, id"
    )
});

/// Binds `$1`–`$11`, the columns that name a request (which call of which turn, whose, where),
/// in the order both inserts list them: a question opened, and a result kept unasked.
fn bind_request<'a>(query: db::Query<'a>, a: &'a NewApproval) -> db::Query<'a> {
    query
        .bind(a.id.as_str())
        .bind(a.lane.as_str())
        .bind(a.inbox_id)
        .bind(a.call_index)
        .bind(a.call_hash.as_str())
        .bind(clean(&a.tool))
        .bind(clean(&a.arguments))
        .bind(a.person.as_str())
        .bind(a.platform.as_str())
        .bind(a.chat_id.as_str())
        .bind(a.thread_id.as_deref())
}

#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Opens the request, or returns the one a previous attempt of the same turn opened for
    /// the same call (whatever its state now).
    async fn approval_open(&self, a: &NewApproval) -> StoreResult<ApprovalRow>;
    async fn approval_get(&self, id: &str) -> StoreResult<Option<ApprovalRow>>;
    /// Records the platform message that carries the buttons, and returns the request's state
    /// as of that write: a request closed while its question was on the way (a stopped turn,
    /// [`ApprovalStore::approvals_abandon`]) is no longer pending, and whoever recorded the id
    /// closes the question. `None` when there is no such request.
    async fn approval_prompted(
        &self,
        id: &str,
        message_id: &str,
    ) -> StoreResult<Option<ApprovalStatus>>;
    /// Answers a pending request before its deadline; `false` when it was not pending any
    /// more (answered, expired) — the first answer wins.
    async fn approval_answer(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        now: i64,
    ) -> StoreResult<bool>;
    /// Denies a pending request whose deadline has passed; `false` when it was not pending.
    async fn approval_expire(&self, id: &str, now: i64) -> StoreResult<bool>;
    /// Moves an approved request to `running`; `false` when it was not `approved` (already
    /// started by an attempt that may have died, or finished).
    async fn approval_start(&self, id: &str) -> StoreResult<bool>;
    /// Keeps the result of a finished call for any retry of the turn.
    async fn approval_finish(&self, id: &str, result: &str) -> StoreResult<()>;
    /// Denies the still-pending requests of one turn that ended without waiting for them (it
    /// was stopped or timed out); returns them, so their questions can be closed.
    async fn approvals_abandon(
        &self,
        lane: &LaneKey,
        inbox_id: i64,
        now: i64,
    ) -> StoreResult<Vec<ApprovalRow>>;
    /// Pending requests, oldest first; of one lane when given.
    async fn approvals_pending(&self, lane: Option<&LaneKey>) -> StoreResult<Vec<ApprovalRow>>;
    /// The result kept for this call (same lane, event, position and hash) by an earlier
    /// attempt of the turn: a call that needed no approval ([`ApprovalStore::tool_result_keep`])
    /// or an approved one that finished.
    async fn tool_result_recall(&self, key: &NewApproval) -> StoreResult<Option<String>>;
    /// Keeps the result of a call that needed no approval, so a retry of the turn (after the
    /// store refused its commit, or a crash) returns it instead of running the tool again. The
    /// record is deleted when the turn commits.
    async fn tool_result_keep(&self, key: &NewApproval, result: &str) -> StoreResult<()>;
}

/// `decided_by` of a kept result: no person decided, the policy let the call run.
pub(super) const KEPT_BY: &str = "policy";

#[async_trait]
impl<S: Pools> ApprovalStore for S {
    async fn approval_open(&self, a: &NewApproval) -> StoreResult<ApprovalRow> {
        bind_request(db::query(
            "INSERT INTO approvals (id, lane, inbox_id, call_index, call_hash, tool, arguments, \
             person, platform, chat_id, thread_id, status, deadline, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', $12, $13) \
             ON CONFLICT (lane, inbox_id, call_index, call_hash) DO NOTHING",
        ), a)
        .bind(a.deadline)
        .bind(a.now)
        .execute(self.writer())
        .await?;
        let raw: Raw = db::query(BY_CALL.as_str())
            .bind(a.lane.as_str())
            .bind(a.inbox_id)
            .bind(a.call_index)
            .bind(a.call_hash.as_str())
            .fetch_one(self.writer())
            .await?;
        raw.typed()
    }

    async fn approval_get(&self, id: &str) -> StoreResult<Option<ApprovalRow>> {
        let raw: Option<Raw> = db::query(BY_ID.as_str())
            .bind(id)
            .fetch_optional(self.writer())
            .await?;
        raw.map(Raw::typed).transpose()
    }

    async fn approval_prompted(
        &self,
        id: &str,
        message_id: &str,
    ) -> StoreResult<Option<ApprovalStatus>> {
        let status: Option<(String,)> =
            db::query("UPDATE approvals SET prompt_message_id = $1 WHERE id = $2 RETURNING status")
                .bind(message_id)
                .bind(id)
                .fetch_optional(self.writer())
                .await?;
        status.map(|(s,)| ApprovalStatus::parse(&s)).transpose()
    }

    async fn approval_answer(
        &self,
        id: &str,
        approve: bool,
        by: &str,
        now: i64,
    ) -> StoreResult<bool> {
        let status = if approve { "approved" } else { "denied" };
        let r = db::query(
            "UPDATE approvals SET status = $1, decided_by = $2, decided_at = $3 \
             WHERE id = $4 AND status = 'pending' AND deadline > $3",
        )
        .bind(status)
        .bind(by)
        .bind(now)
        .bind(id)
        .execute(self.writer())
        .await?;
        Ok(r == 1)
    }

    async fn approval_expire(&self, id: &str, now: i64) -> StoreResult<bool> {
        let r = db::query(
            "UPDATE approvals SET status = 'expired', decided_at = $1 \
             WHERE id = $2 AND status = 'pending' AND deadline <= $1",
        )
        .bind(now)
        .bind(id)
        .execute(self.writer())
        .await?;
        Ok(r == 1)
    }

    async fn approval_start(&self, id: &str) -> StoreResult<bool> {
        let r = db::query(
            "UPDATE approvals SET status = 'running' WHERE id = $1 AND status = 'approved'",
        )
        .bind(id)
        .execute(self.writer())
        .await?;
        Ok(r == 1)
    }

    async fn approval_finish(&self, id: &str, result: &str) -> StoreResult<()> {
        db::query(
            "UPDATE approvals SET status = 'done', result = $1 WHERE id = $2 AND status = 'running'",
        )
        .bind(clean(result))
        .bind(id)
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn approvals_abandon(
        &self,
        lane: &LaneKey,
        inbox_id: i64,
        now: i64,
    ) -> StoreResult<Vec<ApprovalRow>> {
        let raws: Vec<Raw> = db::query(PENDING_OF_EVENT.as_str())
            .bind(lane.as_str())
            .bind(inbox_id)
            .fetch_all(self.writer())
            .await?;
        let mut out = Vec::new();
        for mut raw in raws {
            // The message id as of the closing write, not as of the read above: a question
            // recorded in between is closed here; one recorded after sees `expired` and is
            // closed by its recorder (`approval_prompted`). Exactly one of the two edits it.
            let closed: Option<(Option<String>,)> = db::query(
                "UPDATE approvals SET status = 'expired', decided_at = $1 \
                 WHERE id = $2 AND status = 'pending' RETURNING prompt_message_id",
            )
            .bind(now)
            .bind(raw.id.as_str())
            .fetch_optional(self.writer())
            .await?;
            if let Some((prompt,)) = closed {
                raw.prompt_message_id = prompt;
                raw.status = "expired".into();
                out.push(raw.typed()?);
            }
        }
        Ok(out)
    }

    async fn tool_result_recall(&self, a: &NewApproval) -> StoreResult<Option<String>> {
        let row: Option<(Option<String>,)> = db::query(
            "SELECT result FROM approvals WHERE lane = $1 AND inbox_id = $2 AND call_index = $3 \
             AND call_hash = $4 AND status = 'done'",
        )
        .bind(a.lane.as_str())
        .bind(a.inbox_id)
        .bind(a.call_index)
        .bind(a.call_hash.as_str())
        .fetch_optional(self.writer())
        .await?;
        Ok(row.and_then(|(r,)| r))
    }

    async fn tool_result_keep(&self, a: &NewApproval, result: &str) -> StoreResult<()> {
        bind_request(db::query(
            "INSERT INTO approvals (id, lane, inbox_id, call_index, call_hash, tool, arguments, \
             person, platform, chat_id, thread_id, status, decided_by, decided_at, deadline, \
             result, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'done', $12, $13, $13, $14, $13) \
             ON CONFLICT (lane, inbox_id, call_index, call_hash) DO NOTHING",
        ), a)
        .bind(KEPT_BY)
        .bind(a.now)
        .bind(clean(result))
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn approvals_pending(&self, lane: Option<&LaneKey>) -> StoreResult<Vec<ApprovalRow>> {
        let raws: Vec<Raw> = db::query(PENDING.as_str())
            .bind(lane.map(|l| l.as_str()))
            .fetch_all(self.reader())
            .await?;
        raws.into_iter().map(Raw::typed).collect()
    }
}
