//! Approvals in the chat: a tool call that needs a person's word pauses its turn, asks in the
//! person's own chat (buttons), and waits — durably — for a press from someone allowed to
//! answer in that chat, or for the deadline, which is a denial.
//!
//! The store row is the wait ([`crate::store::ApprovalStore`]): a retried turn (after a crash
//! or a lost lease) finds the request its earlier attempt opened, does not ask twice, resumes
//! the wait or, past the deadline, denies; an approved call runs at most once and a retry reads
//! its recorded result back. A press on any replica answers; waiters here are woken at once,
//! waiters on other replicas see it on their next poll of the row.
//!
//! Must not: let anyone but an allowed sender of the approval's own chat answer it, or treat
//! a missing or unreadable row as consent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use crate::agent::screen::cap_head_tail;
use crate::agent::tools::{ApprovalGate, ApprovalRequest, Decision, Tool, ToolContext, ToolError};
use crate::delivery::{Ask, Outbounds};
use crate::domain::{ChatType, MessageEvent, Platform};
use crate::hooks::Authorizer;
use crate::store::{now_ms, ApprovalRow, ApprovalStatus, NewApproval, Store};

use super::clock::TurnClock;

/// How often a waiter re-reads its row, for presses that landed on another replica.
const POLL: Duration = Duration::from_secs(1);
/// Arguments shown in the question, at most.
const SHOWN_ARGS: usize = 600;

/// One press of an approval button, translated at the platform edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Press {
    pub approval_id: String,
    pub approve: bool,
    pub platform: Platform,
    /// The chat the button was pressed in.
    pub chat_id: String,
    pub sender_id: String,
    /// Discord member roles of the presser (role allowlists).
    pub sender_roles: Vec<String>,
}

/// What a press achieved; [`PressOutcome::text`] is the short answer the presser sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PressOutcome {
    Approved,
    Denied,
    /// The presser may not answer this request (another chat, or not an allowed sender).
    NotYours,
    /// Answered or expired already, or no such request.
    NotOpen,
}

impl PressOutcome {
    pub fn text(self) -> &'static str {
        match self {
            PressOutcome::Approved => "Approved.",
            PressOutcome::Denied => "Denied.",
            PressOutcome::NotYours => "You cannot answer this request.",
            PressOutcome::NotOpen => "This request is no longer open.",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PressOutcome::Approved => "approved",
            PressOutcome::Denied => "denied",
            PressOutcome::NotYours => "refused",
            PressOutcome::NotOpen => "not_open",
        }
    }
}

/// The process's approval desk: answers presses and wakes the turns waiting on them.
#[derive(Clone)]
pub struct Approvals {
    store: Arc<dyn Store>,
    outbounds: Outbounds,
    auth: Authorizer,
    timeout: Duration,
    waiting: Arc<Mutex<HashMap<String, Arc<Notify>>>>,
}

impl Approvals {
    pub fn new(
        store: Arc<dyn Store>,
        outbounds: Outbounds,
        auth: Authorizer,
        timeout: Duration,
    ) -> Approvals {
        Approvals {
            store,
            outbounds,
            auth,
            timeout,
            waiting: Arc::default(),
        }
    }

    /// Answers a request when the presser may; the first answer wins.
    pub async fn press(&self, p: &Press) -> PressOutcome {
        let outcome = self.press_inner(p).await;
        metrics::counter!("herald_approval_presses_total", "platform" => p.platform.as_str(), "outcome" => outcome.as_str()).increment(1);
        tracing::info!(approval = %p.approval_id, platform = %p.platform, sender = %p.sender_id,
            outcome = outcome.as_str(), "approval button pressed");
        outcome
    }

    async fn press_inner(&self, p: &Press) -> PressOutcome {
        let row = match self.store.approval_get(&p.approval_id).await {
            Ok(Some(row)) => row,
            Ok(None) => return PressOutcome::NotOpen,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read an approval request; the press is not recorded");
                return PressOutcome::NotOpen;
            }
        };
        // Only the approval's own chat, and only someone allowed to talk to the agent there.
        // A Discord button in a thread reports the thread (snowflakes are unique, so the
        // thread id cannot name another chat).
        let same_chat = row.chat_id == p.chat_id
            || (p.platform == Platform::Discord && row.thread_id.as_deref() == Some(&p.chat_id));
        if row.platform != p.platform.as_str() || !same_chat {
            return PressOutcome::NotYours;
        }
        let mut ev = MessageEvent::text(p.platform, &p.chat_id, &p.sender_id, "");
        ev.chat_type = ChatType::Group;
        ev.sender_roles = p.sender_roles.clone();
        // The web chat has no sender identity of its own: its callers passed the HTTP guard.
        ev.from_loopback = p.platform == Platform::Web;
        if !self
            .auth
            .is_allowed_or_paired(&ev, self.store.as_ref())
            .await
        {
            return PressOutcome::NotYours;
        }
        let by = format!("{}:{}", p.platform.as_str(), p.sender_id);
        match self
            .store
            .approval_answer(&p.approval_id, p.approve, &by, now_ms())
            .await
        {
            Ok(true) => {
                self.wake(&p.approval_id);
                if p.approve {
                    PressOutcome::Approved
                } else {
                    PressOutcome::Denied
                }
            }
            Ok(false) => PressOutcome::NotOpen,
            Err(e) => {
                tracing::warn!(error = %e, "cannot record an approval answer");
                PressOutcome::NotOpen
            }
        }
    }

    /// Pending requests of one lane (the web page shows their buttons).
    pub async fn pending(
        &self,
        lane: Option<&crate::domain::LaneKey>,
    ) -> crate::store::StoreResult<Vec<ApprovalRow>> {
        self.store.approvals_pending(lane).await
    }

    /// Closes the requests a turn left open when it ended without their answer (stopped, timed
    /// out): they are denied, and their questions say so. A turn that lost its lease or was
    /// shut down keeps them — its retry resumes the wait.
    pub async fn abandon(&self, lane: &crate::domain::LaneKey, inbox_id: i64, why: &str) {
        let rows = match self.store.approvals_abandon(lane, inbox_id, now_ms()).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "cannot close a turn's open approval requests");
                return;
            }
        };
        for row in rows {
            self.wake(&row.id);
            let platform = crate::domain::Platform::parse(&row.platform);
            let (Some(msg), Some(out)) = (
                row.prompt_message_id.as_deref(),
                platform.and_then(|p| self.outbounds.get(p)),
            ) else {
                continue;
            };
            out.ask_closed(
                &row.chat_id,
                row.thread_id.as_deref(),
                msg,
                &format!("⏹ {why}: {}", row.tool),
            )
            .await;
        }
    }

    fn wake(&self, id: &str) {
        if let Some(n) = self.waiting.lock().expect("approvals lock").get(id) {
            n.notify_waiters();
        }
    }

    fn waiter(&self, id: &str) -> Arc<Notify> {
        self.waiting
            .lock()
            .expect("approvals lock")
            .entry(id.to_string())
            .or_default()
            .clone()
    }

    fn forget(&self, id: &str) {
        self.waiting.lock().expect("approvals lock").remove(id);
    }

    /// The gate of one turn: asks in the chat of the event the turn answers.
    pub fn gate<'a>(&'a self, ev: &'a MessageEvent, clock: &'a TurnClock) -> TurnGate<'a> {
        TurnGate {
            desk: self,
            ev,
            clock,
        }
    }
}

/// [`ApprovalGate`] for one turn.
pub struct TurnGate<'a> {
    desk: &'a Approvals,
    ev: &'a MessageEvent,
    clock: &'a TurnClock,
}

impl TurnGate<'_> {
    async fn open(&self, ctx: &ToolContext, req: &ApprovalRequest) -> Result<ApprovalRow, String> {
        let inbox_id = ctx
            .inbox_id
            .ok_or_else(|| "the call does not belong to a message anyone sent".to_string())?;
        let now = now_ms();
        let hash = hex::encode(Sha256::digest(
            format!("{}\n{}", req.tool, req.arguments).as_bytes(),
        ));
        let new = NewApproval {
            id: uuid::Uuid::new_v4().simple().to_string(),
            lane: ctx.lane.clone(),
            inbox_id,
            call_index: req.call_index as i64,
            call_hash: hash,
            tool: req.tool.clone(),
            arguments: cap_head_tail(&req.arguments, 20_000, "the arguments"),
            person: ctx.person.clone(),
            platform: self.ev.platform.as_str().to_string(),
            chat_id: self.ev.chat_id.clone(),
            thread_id: self.ev.thread_id.clone(),
            deadline: now + self.desk.timeout.as_millis() as i64,
            now,
        };
        self.desk
            .store
            .approval_open(&new)
            .await
            .map_err(|e| format!("the request could not be recorded ({e})"))
    }

    /// Sends the question unless an earlier attempt did.
    async fn ask(&self, row: &ApprovalRow, req: &ApprovalRequest) -> Result<(), String> {
        if row.prompt_message_id.is_some() {
            return Ok(());
        }
        let Some(out) = self.desk.outbounds.get(self.ev.platform) else {
            return Err("this chat's platform is not connected here".into());
        };
        let text = question(req, self.desk.timeout);
        let id = out
            .ask(&Ask {
                chat_id: &row.chat_id,
                thread_id: row.thread_id.as_deref(),
                approval_id: &row.id,
                text: &text,
            })
            .await
            .map_err(|e| format!("the question could not be shown ({e})"))?;
        if let Err(e) = self.desk.store.approval_prompted(&row.id, &id).await {
            tracing::warn!(error = %e, "cannot record the approval question's message id");
        }
        Ok(())
    }

    /// Waits until the row leaves `pending` or its deadline passes (then expires it).
    async fn wait(&self, id: &str) -> Result<ApprovalRow, String> {
        let notify = self.desk.waiter(id);
        let _parked = self.clock.park();
        let result = loop {
            let woken = notify.notified();
            let row = match self.desk.store.approval_get(id).await {
                Ok(Some(row)) => row,
                Ok(None) => break Err("the request disappeared".to_string()),
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
            self.desk.outbounds.get(self.ev.platform),
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
        if self.ev.platform == Platform::Cron || self.ev.internal {
            return deny("there is no one to ask in a scheduled run".into());
        }
        let row = match self.open(ctx, req).await {
            Ok(row) => row,
            Err(why) => return deny(why),
        };
        if row.status == ApprovalStatus::Pending {
            if let Err(why) = self.ask(&row, req).await {
                // Nobody saw the question: it must not stay answerable.
                let _ = self
                    .desk
                    .store
                    .approval_answer(&row.id, false, "herald", now_ms())
                    .await;
                return deny(why);
            }
        }
        let row = match self.wait(&row.id).await {
            Ok(row) => row,
            Err(why) => return deny(why),
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

    async fn run_once(
        &self,
        ctx: &ToolContext,
        req: &ApprovalRequest,
        tool: &dyn Tool,
    ) -> Result<String, ToolError> {
        let row = self
            .open(ctx, req)
            .await
            .map_err(|why| ToolError::Denied(why.to_string()))?;
        match row.status {
            ApprovalStatus::Done => return Ok(row.result.unwrap_or_default()),
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
        let result = tool.call(ctx, &req.arguments).await;
        let text = match &result {
            Ok(t) => t.clone(),
            Err(e) => e.to_string(),
        };
        if let Err(e) = self.desk.store.approval_finish(&row.id, &text).await {
            tracing::warn!(error = %e, "cannot record an approved call's result");
        }
        result
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
