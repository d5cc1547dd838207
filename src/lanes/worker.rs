//! One lane's worker: take the turn lease, drain the lane's inbox in arrival order, one turn at
//! a time, then release the lease when idle.
//!
//! A turn's output (user message, tool traffic, reply, outbox chunks, inbox mark) lands in one
//! lease-checked transaction. A crash before that commit re-runs the turn; a crash after it
//! never sends twice (the outbox remembers). A worker that loses its lease stops at once and
//! writes nothing more.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::commands::{parse_command, Command, HELP_TEXT};
use super::router::LaneRouter;
use crate::agent::prompt::{build_system_prompt, PromptParts};
use crate::agent::turn::{run_turn, TurnInput};
use crate::domain::{LaneKey, MessageEvent, Role};
use crate::hooks::{Dispatch, PreLlmContext};
use crate::store::{
    InboxRow, InboxStatus, Lease, NewMessage, NewOutbox, Session, StoreError, TurnCommit,
};

pub(super) struct Worker {
    router: Arc<LaneRouter>,
    lane: LaneKey,
    tx: mpsc::Sender<()>,
    rx: mpsc::Receiver<()>,
    holder: String,
}

/// Why a worker stops before its lane is drained.
enum Stop {
    LeaseLost,
    Shutdown,
}

impl Worker {
    pub(super) fn new(
        router: Arc<LaneRouter>,
        lane: LaneKey,
        tx: mpsc::Sender<()>,
        rx: mpsc::Receiver<()>,
    ) -> Worker {
        let holder = format!(
            "{}/{}",
            router.deps.replica_id,
            uuid::Uuid::new_v4().simple()
        );
        Worker {
            router,
            lane,
            tx,
            rx,
            holder,
        }
    }

    pub(super) async fn run(mut self) {
        let span = tracing::info_span!("lane", lane = %self.lane);
        async move {
            let permit = tokio::select! {
                p = self.router.slots.clone().acquire_owned() => p.ok(),
                _ = self.router.abort.cancelled() => None,
            };
            if permit.is_some() {
                if let Some(lease) = self.acquire().await {
                    self.serve(&lease).await;
                }
            }
            self.leave();
        }
        .instrument(span)
        .await
    }

    /// A few tries: a lease held elsewhere means another worker (maybe another replica) is on
    /// this lane and will drain it; the rescan catches anything left behind.
    async fn acquire(&self) -> Option<Lease> {
        let deps = &self.router.deps;
        let ttl = Duration::from_secs(deps.config.lanes.lease_ttl_secs);
        for attempt in 0..20u32 {
            match deps
                .store
                .lease_acquire(self.lane.as_str(), &self.holder, ttl)
                .await
            {
                Ok(Some(lease)) => {
                    if lease.token > 1 {
                        metrics::counter!("herald_lease_acquired_total", "kind" => "takeover")
                            .increment(1);
                    }
                    return Some(lease);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "lease acquire failed"),
            }
            if attempt >= 5
                && deps
                    .store
                    .lease_get(self.lane.as_str())
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|l| l.expires_at > crate::store::now_ms() + 1000)
            {
                return None;
            }
            tokio::select! {
                _ = self.router.abort.cancelled() => return None,
                _ = tokio::time::sleep(Duration::from_millis(100 * (attempt as u64 + 1).min(10))) => {}
            }
        }
        None
    }

    async fn serve(&mut self, lease: &Lease) {
        let deps = self.router.deps.clone();
        let lost = CancellationToken::new();
        let heartbeat = tokio::spawn(heartbeat(
            deps.clone(),
            lease.clone(),
            lost.clone(),
            self.router.abort.clone(),
        ));
        let idle = Duration::from_secs(deps.config.lanes.idle_secs);
        'outer: loop {
            if self.router.stop_taking.is_cancelled() || lost.is_cancelled() {
                break;
            }
            let rows = match deps.store.inbox_pending(&self.lane, 8).await {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the lane's inbox; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if rows.is_empty() {
                tokio::select! {
                    _ = self.rx.recv() => continue,
                    _ = lost.cancelled() => break,
                    _ = self.router.stop_taking.cancelled() => break,
                    _ = tokio::time::sleep(idle) => {
                        if self.may_leave() { break } else { continue }
                    }
                }
            }
            for row in rows {
                if self.router.stop_taking.is_cancelled() {
                    break 'outer;
                }
                match self.process(lease, row, &lost).await {
                    Ok(()) => {}
                    Err(Stop::LeaseLost) => {
                        metrics::counter!("herald_lease_lost_total").increment(1);
                        tracing::warn!("turn lease lost; this worker stops writing");
                        break 'outer;
                    }
                    Err(Stop::Shutdown) => break 'outer,
                }
            }
        }
        heartbeat.abort();
        if !lost.is_cancelled() {
            if let Err(e) = deps.store.lease_release(lease).await {
                tracing::warn!(error = %e, "lease release failed; it will expire");
            }
        }
    }

    /// Idle exit: leave the map only if no wake is waiting (checked under the router lock).
    fn may_leave(&mut self) -> bool {
        let mut workers = self.router.workers.lock().expect("router lock");
        if self.rx.try_recv().is_ok() {
            return false;
        }
        if workers
            .get(&self.lane)
            .is_some_and(|tx| tx.same_channel(&self.tx))
        {
            workers.remove(&self.lane);
        }
        metrics::gauge!("herald_lane_workers").set(workers.len() as f64);
        true
    }

    fn leave(&mut self) {
        let mut workers = self.router.workers.lock().expect("router lock");
        if workers
            .get(&self.lane)
            .is_some_and(|tx| tx.same_channel(&self.tx))
        {
            workers.remove(&self.lane);
        }
        metrics::gauge!("herald_lane_workers").set(workers.len() as f64);
    }

    async fn process(
        &self,
        lease: &Lease,
        row: InboxRow,
        lost: &CancellationToken,
    ) -> Result<(), Stop> {
        let deps = &self.router.deps;
        let mut backoff = Duration::from_millis(200);
        loop {
            match self.process_once(lease, &row, lost).await {
                Ok(()) => {
                    let _ = deps.finished.send(row.id);
                    return Ok(());
                }
                Err(Failure::Stop(s)) => return Err(s),
                Err(Failure::Store(StoreError::LeaseLost { .. })) => return Err(Stop::LeaseLost),
                Err(Failure::Store(e)) => {
                    // A store that is briefly gone: keep the event, wait, try again.
                    tracing::warn!(error = %e, inbox_id = row.id, "store error during a turn; retrying");
                    tokio::select! {
                        _ = self.router.abort.cancelled() => return Err(Stop::Shutdown),
                        _ = lost.cancelled() => return Err(Stop::LeaseLost),
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                }
            }
        }
    }

    async fn process_once(
        &self,
        lease: &Lease,
        row: &InboxRow,
        lost: &CancellationToken,
    ) -> Result<(), Failure> {
        let deps = &self.router.deps;
        let attempts = deps.store.inbox_bump_attempts(row.id).await?;
        if attempts > deps.config.lanes.max_attempts {
            let reply = format!(
                "Sorry, I could not answer this message after {} attempts; it has been set aside.",
                attempts - 1
            );
            tracing::error!(
                inbox_id = row.id,
                attempts,
                "giving up on an inbound message"
            );
            return self
                .skip(row, "gave up after repeated failures", Some(reply))
                .await;
        }
        let ev = match deps.pre_dispatch.run(&row.event).await {
            Dispatch::Skip {
                hook,
                reason,
                reply,
            } => {
                return self.skip(row, &format!("{hook}: {reason}"), reply).await;
            }
            Dispatch::Turn(ev) => ev,
        };
        if !ev.can_start_turn() {
            return self
                .skip(row, "not a message the agent answers", None)
                .await;
        }
        if !ev.internal {
            if let Some(cmd) = parse_command(&ev.text, None) {
                return self.command(lease, row, cmd).await;
            }
        }
        self.turn(lease, row, &ev, lost).await
    }

    async fn skip(&self, row: &InboxRow, note: &str, reply: Option<String>) -> Result<(), Failure> {
        let deps = &self.router.deps;
        let outbox = reply
            .map(|text| self.outbox_rows(row, &text, "skip"))
            .unwrap_or_default();
        deps.store.inbox_skip(row.id, note, &outbox).await?;
        if !outbox.is_empty() {
            deps.outbox_wake.notify_one();
        }
        Ok(())
    }

    async fn command(&self, lease: &Lease, row: &InboxRow, cmd: Command) -> Result<(), Failure> {
        let store = &self.router.deps.store;
        let reply = match cmd {
            Command::Start | Command::Help => HELP_TEXT.to_string(),
            Command::New => match store.session_current(&self.lane).await? {
                Some(s) => {
                    store.session_close(lease, &s.id, "new").await?;
                    "Started a new session. Earlier messages stay searchable.".to_string()
                }
                None => "This is already a fresh session.".to_string(),
            },
            // A running turn was cancelled when the command arrived (see the router); by the
            // time it is processed here, nothing runs in this lane.
            Command::Stop => "Stopped. Nothing is running in this conversation now.".to_string(),
            Command::Status => {
                let session = store.session_current(&self.lane).await?;
                let pending = store
                    .inbox_pending(&self.lane, 100)
                    .await?
                    .len()
                    .saturating_sub(1);
                match session {
                    Some(s) => {
                        let n = store.messages(&s.id, true).await?.len();
                        format!(
                            "Session {} ({} messages, since {}), model {}, {} message(s) queued.",
                            s.id,
                            n,
                            chrono::DateTime::from_timestamp_millis(s.started_at)
                                .map(|t| t.to_rfc3339())
                                .unwrap_or_default(),
                            s.model,
                            pending
                        )
                    }
                    None => format!("No session yet; {pending} message(s) queued."),
                }
            }
        };
        self.skip(row, "command", Some(reply)).await
    }

    async fn session(&self, lease: &Lease, ev: &MessageEvent) -> Result<Session, Failure> {
        let deps = &self.router.deps;
        if let Some(s) = deps.store.session_current(&self.lane).await? {
            return Ok(s);
        }
        let id = uuid::Uuid::new_v4().to_string();
        let started = Utc::now();
        let model = deps.chain.primary_name();
        let system_prompt = build_system_prompt(
            &deps.config.agent,
            &PromptParts {
                identity: &deps.identity,
                platform: ev.platform,
                session_id: &id,
                started_at: started,
                model: &model,
            },
        );
        let s = Session {
            id,
            lane: self.lane.to_string(),
            parent_id: None,
            started_at: started.timestamp_millis(),
            ended_at: None,
            end_reason: None,
            system_prompt,
            model,
            compaction_strikes: 0,
            fallback_streak: 0,
            breaker_blocked_since: None,
            cooldown_until: None,
        };
        deps.store.session_create(lease, &s).await?;
        tracing::info!(session = %s.id, "session opened");
        Ok(s)
    }

    async fn turn(
        &self,
        lease: &Lease,
        row: &InboxRow,
        ev: &MessageEvent,
        lost: &CancellationToken,
    ) -> Result<(), Failure> {
        let deps = &self.router.deps;
        let started = Instant::now();
        let session = self.session(lease, ev).await?;
        let history = deps.store.messages(&session.id, true).await?;
        let turn_id = deps
            .store
            .turn_begin(lease, &session.id, Some(row.id))
            .await?;
        let span = tracing::info_span!("turn", session = %session.id, turn = turn_id, platform = %ev.platform);
        let first_turn = !history.iter().any(|m| m.role == Role::User);
        let api_content = deps
            .pre_llm
            .api_content(
                &ev.text,
                &PreLlmContext {
                    lane: &self.lane,
                    session_id: &session.id,
                    first_turn,
                    event: ev,
                },
            )
            .await;
        let stop = CancellationToken::new();
        self.router
            .running_turns
            .lock()
            .expect("turns lock")
            .insert(self.lane.clone(), stop.clone());
        let typing = self.typing(ev, stop.clone());
        let timeout = Duration::from_secs(deps.config.agent.turn_timeout_secs);
        let agent = run_turn(
            &deps.chain,
            &deps.tools,
            TurnInput {
                system_prompt: &session.system_prompt,
                history: &history,
                user_content: &ev.text,
                user_api_content: api_content.as_deref(),
                max_iterations: deps.config.agent.max_iterations,
            },
        );
        let outcome = tokio::select! {
            r = tokio::time::timeout(timeout, agent.instrument(span.clone())) => match r {
                Ok(r) => Outcome::Done(r),
                Err(_) => Outcome::TimedOut,
            },
            _ = stop.cancelled() => Outcome::Stopped,
            _ = lost.cancelled() => Outcome::Abandoned(Stop::LeaseLost),
            _ = self.router.abort.cancelled() => Outcome::Abandoned(Stop::Shutdown),
        };
        stop.cancel();
        typing.abort();
        self.router
            .running_turns
            .lock()
            .expect("turns lock")
            .remove(&self.lane);

        let mut user = NewMessage::new(Role::User, ev.text.clone());
        user.api_content = api_content;
        user.platform_message_id = Some(ev.platform_message_id.clone());
        let mut messages = vec![user];
        let (reply, status, note) = match outcome {
            Outcome::Abandoned(s) => return Err(Failure::Stop(s)),
            Outcome::Done(Ok(out)) => {
                messages.extend(out.messages);
                (out.reply, InboxStatus::Done, None)
            }
            Outcome::Done(Err(e)) => {
                let crate::agent::turn::TurnError::Llm(e) = e;
                tracing::warn!(parent: &span, error = %e, class = e.class(), "turn failed; the user gets an error line");
                (e.user_message(), InboxStatus::Failed, Some(e.to_string()))
            }
            Outcome::TimedOut => (
                format!(
                    "The model did not finish within {} seconds; please try again (your message was kept).",
                    timeout.as_secs()
                ),
                InboxStatus::Failed,
                Some("turn timed out".to_string()),
            ),
            Outcome::Stopped => ("Stopped.".to_string(), InboxStatus::Done, Some("stopped".to_string())),
        };
        let outbox = self.outbox_rows(row, &reply, "turn");
        deps.store
            .turn_commit(
                lease,
                &TurnCommit {
                    turn_id,
                    session_id: session.id.clone(),
                    messages,
                    outbox,
                    inbox_id: Some(row.id),
                    inbox_status: status,
                    note,
                },
            )
            .await?;
        deps.outbox_wake.notify_one();
        let secs = started.elapsed().as_secs_f64();
        metrics::counter!("herald_turns_total", "platform" => ev.platform.as_str(), "status" => status.as_str()).increment(1);
        metrics::histogram!("herald_turn_duration_seconds", "platform" => ev.platform.as_str())
            .record(secs);
        tracing::info!(parent: &span, status = status.as_str(), duration_ms = (secs * 1000.0) as u64, "turn finished");
        Ok(())
    }

    fn typing(&self, ev: &MessageEvent, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        let outbound = self.router.deps.outbounds.get(ev.platform).cloned();
        let chat = ev.chat_id.clone();
        let thread = ev.thread_id.clone();
        tokio::spawn(async move {
            let Some(o) = outbound else { return };
            loop {
                o.typing(&chat, thread.as_deref()).await;
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(4)) => {}
                }
            }
        })
    }

    /// Reply chunks with keys derived from (lane, inbox event, chunk): a re-run of the same
    /// event produces the same keys, so a chunk can never be queued twice.
    fn outbox_rows(&self, row: &InboxRow, text: &str, kind: &str) -> Vec<NewOutbox> {
        let ev = &row.event;
        self.router
            .deps
            .outbounds
            .split(ev.platform, text)
            .into_iter()
            .enumerate()
            .map(|(i, chunk)| NewOutbox {
                idem_key: format!("{}:{}:{kind}:{i}", self.lane, row.id),
                lane: self.lane.to_string(),
                platform: ev.platform.as_str().to_string(),
                chat_id: ev.chat_id.clone(),
                thread_id: ev.thread_id.clone(),
                reply_to: Some(ev.platform_message_id.clone()),
                inbox_id: Some(row.id),
                chunk_index: i as i64,
                text: chunk,
            })
            .collect()
    }
}

enum Failure {
    Stop(Stop),
    Store(StoreError),
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

enum Outcome {
    Done(Result<crate::agent::turn::TurnOutput, crate::agent::turn::TurnError>),
    TimedOut,
    Stopped,
    Abandoned(Stop),
}

/// Renews the lease; on loss, cancels `lost` so the worker stops before its next write.
async fn heartbeat(
    deps: Arc<super::Deps>,
    lease: Lease,
    lost: CancellationToken,
    abort: CancellationToken,
) {
    let every = Duration::from_secs(deps.config.lanes.heartbeat_secs);
    let ttl = Duration::from_secs(deps.config.lanes.lease_ttl_secs);
    loop {
        tokio::select! {
            _ = abort.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        match deps.store.lease_renew(&lease, ttl).await {
            Ok(()) => {}
            Err(StoreError::LeaseLost { .. }) => {
                lost.cancel();
                return;
            }
            Err(e) => tracing::warn!(error = %e, "lease renewal failed; retrying"),
        }
    }
}
