//! The approval gate of one turn: open (or find again) the request for a call, ask once in
//! the chat of the message being answered, wait durably for the answer or the deadline, and
//! run an approved call at most once.

use std::time::Duration;

use async_trait::async_trait;

use super::Approvals;
use crate::agent::tools::{
    ApprovalGate, ApprovalRequest, Decision, Tool, ToolContext, ToolError, ToolOutput,
};
use crate::delivery::pace::Urgency;
use crate::delivery::{Ask, SendError};
use crate::domain::{MessageEvent, Platform};
use crate::lanes::clock::TurnClock;
use crate::screen::cap_head_tail;
use crate::store::{now_ms, ApprovalRow, ApprovalStatus, NewApproval, StoreError};

/// Why a tool call could not be put to the person; the text is the denial the model reads.
#[derive(Debug, thiserror::Error)]
enum AskError {
    #[error("the call does not belong to a message anyone sent")]
    NoMessage,
    #[error("the request could not be recorded ({0})")]
    NotRecorded(#[source] StoreError),
    #[error("this chat's platform is not connected here")]
    NotConnected,
    #[error("the question could not be shown ({0})")]
    NotShown(#[source] SendError),
    #[error("the question's send was cut off ({0})")]
    Cut(String),
    #[error("the request disappeared")]
    Disappeared,
    #[error(
        "an API client cannot show approval buttons, and this key's person has no linked \
         Telegram chat to ask in (a telegram:<id> identity in their [[people]] entry)"
    )]
    NoLinkedChat,
}

/// How often a waiter re-reads its row, for presses that landed on another replica.
const POLL: Duration = Duration::from_secs(1);
/// Arguments shown in the question, at most.
const SHOWN_ARGS: usize = 600;

/// [`ApprovalGate`] for one turn.
pub struct TurnGate<'a> {
    desk: &'a Approvals,
    ev: &'a MessageEvent,
    clock: &'a TurnClock,
}

impl<'a> TurnGate<'a> {
    pub(super) fn new(desk: &'a Approvals, ev: &'a MessageEvent, clock: &'a TurnClock) -> Self {
        TurnGate { desk, ev, clock }
    }

    async fn open(
        &self,
        ctx: &ToolContext,
        req: &ApprovalRequest,
    ) -> Result<ApprovalRow, AskError> {
        let inbox_id = ctx.inbox_id.ok_or(AskError::NoMessage)?;
        let place = self
            .desk
            .place(self.ev, &ctx.person)
            .ok_or(AskError::NoLinkedChat)?;
        let now = now_ms();
        let hash = super::kept::call_hash(req);
        let new = NewApproval {
            id: uuid::Uuid::new_v4().simple().to_string(),
            lane: ctx.lane.clone(),
            inbox_id,
            call_index: req.call_index as i64,
            call_hash: hash,
            tool: req.tool.clone(),
            arguments: cap_head_tail(&req.arguments, 20_000, "the arguments"),
            person: place.person,
            platform: place.platform.as_str().to_string(),
            chat_id: place.chat_id,
            thread_id: place.thread_id,
            deadline: now + self.desk.timeout.as_millis() as i64,
            now,
        };
        self.desk
            .store
            .approval_open(&new)
            .await
            .map_err(AskError::NotRecorded)
    }

    /// Sends the question unless an earlier attempt did. The send and the recording of its
    /// message id run as one task on the app's tracker, so a turn stopped in between (its
    /// future dropped mid-send) still records the id, and a question whose request was closed
    /// meanwhile is closed at once instead of keeping buttons nobody can use.
    async fn ask(&self, row: &ApprovalRow, req: &ApprovalRequest) -> Result<(), AskError> {
        if row.prompt_message_id.is_some() {
            return Ok(());
        }
        let Some((platform, out)) = Platform::parse(&row.platform)
            .and_then(|p| Some((p, self.desk.outbounds.get(p)?.clone())))
        else {
            return Err(AskError::NotConnected);
        };
        let question = Question {
            desk: self.desk.clone(),
            out,
            platform,
            row: row.clone(),
            tool: req.tool.clone(),
            text: question(req, self.desk.timeout),
        };
        self.desk
            .tracker
            .spawn(question.send())
            .await
            .unwrap_or_else(|e| Err(AskError::Cut(e.to_string())))
    }

    /// Waits until the row leaves `pending` or its deadline passes (then expires it).
    async fn wait(&self, id: &str) -> Result<ApprovalRow, AskError> {
        let notify = self.desk.waiter(id);
        let _parked = self.clock.park();
        let result = loop {
            let woken = notify.notified();
            let row = match self.desk.store.approval_get(id).await {
                Ok(Some(row)) => row,
                Ok(None) => break Err(AskError::Disappeared),
                // A store hiccup: keep waiting until the deadline, re-reading.
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read an approval request; retrying");
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            };
            if row.status != ApprovalStatus::Pending {
                break Ok(row);
            }
            let now = now_ms();
            if now >= row.deadline {
                if let Err(e) = self.desk.store.approval_expire(id, now).await {
                    tracing::warn!(error = %e, "cannot expire an approval request; retrying");
                }
                continue;
            }
            let left = Duration::from_millis((row.deadline - now) as u64);
            tokio::select! {
                _ = woken => {}
                _ = tokio::time::sleep(left.min(POLL)) => {}
            }
        };
        self.desk.forget(id);
        result
    }

    async fn close(&self, row: &ApprovalRow, text: &str) {
        let (Some(msg), Some(out)) = (
            row.prompt_message_id.as_deref(),
            Platform::parse(&row.platform).and_then(|p| self.desk.outbounds.get(p)),
        ) else {
            return;
        };
        out.ask_closed(&row.chat_id, row.thread_id.as_deref(), msg, text)
            .await;
    }
}

#[async_trait]
impl ApprovalGate for TurnGate<'_> {
    async fn decide(&self, ctx: &ToolContext, req: &ApprovalRequest) -> Decision {
        let deny = |reason: String| {
            tracing::info!(tool = %req.tool, reason = %reason, "tool call denied");
            Decision::Denied { reason }
        };
        if self.ev.platform == Platform::CRON || self.ev.is_internal() {
            return deny("there is no one to ask in a scheduled run".into());
        }
        let row = match self.open(ctx, req).await {
            Ok(row) => row,
            Err(why) => return deny(why.to_string()),
        };
        if row.status == ApprovalStatus::Pending {
            if let Err(why) = self.ask(&row, req).await {
                // Nobody saw the question: it must not stay answerable.
                let _ = self
                    .desk
                    .store
                    .approval_answer(&row.id, false, "herald", now_ms())
                    .await;
                return deny(why.to_string());
            }
        }
        let row = match self.wait(&row.id).await {
            Ok(row) => row,
            Err(why) => return deny(why.to_string()),
        };
        let by = row.decided_by.clone().unwrap_or_default();
        match row.status {
            ApprovalStatus::Approved | ApprovalStatus::Running | ApprovalStatus::Done => {
                self.close(&row, &format!("✅ Approved: {}", req.tool))
                    .await;
                Decision::Approved { by }
            }
            ApprovalStatus::Denied => {
                self.close(&row, &format!("❌ Denied: {}", req.tool)).await;
                deny("denied by the person".into())
            }
            ApprovalStatus::Expired | ApprovalStatus::Pending => {
                self.close(&row, &format!("⌛ Not answered in time: {}", req.tool))
                    .await;
                deny(format!(
                    "nobody answered within {} seconds",
                    self.desk.timeout.as_secs()
                ))
            }
        }
    }

    async fn run_unasked(
        &self,
        ctx: &ToolContext,
        req: &ApprovalRequest,
        tool: &dyn Tool,
    ) -> Result<ToolOutput, ToolError> {
        super::kept::run(self.desk.store.as_ref(), self.ev, ctx, req, tool).await
    }

    async fn run_once(
        &self,
        ctx: &ToolContext,
        req: &ApprovalRequest,
        tool: &dyn Tool,
    ) -> Result<ToolOutput, ToolError> {
        let row = self
            .open(ctx, req)
            .await
            .map_err(|why| ToolError::Denied(why.to_string()))?;
        match row.status {
            ApprovalStatus::Done => return Ok(ToolOutput::text(row.result.unwrap_or_default())),
            ApprovalStatus::Running => {
                return Err(ToolError::Failed(
                    "this approved call was cut off by a restart and is not repeated; it may or \
                     may not have taken effect"
                        .into(),
                ))
            }
            ApprovalStatus::Approved => {}
            _ => return Err(ToolError::Denied("it was not approved".into())),
        }
        match self.desk.store.approval_start(&row.id).await {
            Ok(true) => {}
            Ok(false) => {
                return Err(ToolError::Failed(
                    "this approved call is already being run".into(),
                ))
            }
            Err(e) => return Err(ToolError::Failed(format!("cannot record the call ({e})"))),
        }
        let result = tool.call_output(ctx, &req.arguments).await;
        let text = match &result {
            Ok(t) => t.text.clone(),
            Err(e) => e.to_string(),
        };
        if let Err(e) = self.desk.store.approval_finish(&row.id, &text).await {
            tracing::warn!(error = %e, "cannot record an approved call's result");
        }
        result
    }
}

/// One question on its way: owned, so its task outlives the turn that asked.
struct Question {
    desk: Approvals,
    out: std::sync::Arc<dyn crate::delivery::Outbound>,
    platform: Platform,
    row: ApprovalRow,
    tool: String,
    text: String,
}

impl Question {
    async fn send(self) -> Result<(), AskError> {
        let row = &self.row;
        // The person waits on the question: it may spend the chat's burst.
        self.desk
            .outbounds
            .pace
            .wait(self.platform, &row.chat_id, Urgency::Person)
            .await;
        let id = self
            .out
            .ask(&Ask {
                chat_id: &row.chat_id,
                thread_id: row.thread_id.as_deref(),
                approval_id: &row.id,
                text: &self.text,
            })
            .await
            .map_err(AskError::NotShown)?;
        match self.desk.store.approval_prompted(&row.id, &id).await {
            // Closed by a stopped turn before its id was known (`Approvals::abandon` could not
            // edit it): nobody else will, so close it here.
            Ok(Some(ApprovalStatus::Expired)) => {
                let text = format!("⏹ No longer open: {}", self.tool);
                self.out
                    .ask_closed(&row.chat_id, row.thread_id.as_deref(), &id, &text)
                    .await;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot record the approval question's message id")
            }
        }
        Ok(())
    }
}

/// The question shown to the person.
fn question(req: &ApprovalRequest, timeout: Duration) -> String {
    let args = cap_head_tail(&req.arguments, SHOWN_ARGS, "the arguments");
    let floor = if req.hardline {
        " (always asked for this kind of tool)"
    } else {
        ""
    };
    format!(
        "🔐 The agent wants to run {} from {}{floor} with:\n{args}\n\nApprove or deny within {} minutes; no answer means no.",
        req.tool,
        req.origin,
        timeout.as_secs().div_ceil(60)
    )
}
