//! A model turn inside a lane worker: open the session if needed (building and storing its
//! system prompt), run the agent loop under the turn deadline, and land everything the turn
//! produced in one lease-checked commit (what it sends is planned in `reply.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

use super::activity::ActivityEntry;
use super::clock::TurnClock;
use super::worker::{Failure, Stop, Worker};
use crate::agent::context::in_turn::InTurnBudget;
use crate::agent::context::{ContextEngine, Known, Prepared};
use crate::agent::prompt::{build_system_prompt, load_sources, PromptParts};
use crate::agent::tools::ToolContext;
use crate::agent::turn::{run_turn, TurnError, TurnInput, TurnOutput};
use crate::domain::{MessageEvent, Platform, Role};
use crate::hooks::PreLlmContext;
use crate::store::{
    InboxAttempt, InboxRow, InboxStatus, Lease, NewMessage, Session, StoredMessage, TurnCommit,
};

enum Outcome {
    Done(Result<TurnOutput, TurnError>),
    TimedOut,
    Stopped,
    Abandoned(Stop),
}

impl Worker {
    pub(super) async fn session(
        &self,
        lease: &Lease,
        ev: &MessageEvent,
    ) -> Result<Session, Failure> {
        let deps = &self.router.deps;
        if let Some(s) = deps.store.session_current(&self.lane).await? {
            return Ok(s);
        }
        let id = uuid::Uuid::new_v4().to_string();
        let started = Utc::now();
        // Lineage: the lane's previous session, if any.
        let parent_id = deps
            .store
            .sessions_list(Some(&self.lane), 1)
            .await?
            .into_iter()
            .next()
            .map(|p| p.id);
        let model = deps.chain.primary_name();
        // The prompt files are read now, once per session: an edit reaches the next session.
        let window = crate::agent::context::window::context_window(&deps.config.llm).await;
        let mut sources = load_sources(&deps.config, window);
        sources.memory = crate::agent::memory::snapshot_for(&deps.config, ev);
        sources.tool_guidance = deps
            .tools
            .guidance()
            .into_iter()
            .map(|(label, text)| crate::agent::prompt::Block { label, text })
            .collect();
        let system_prompt = build_system_prompt(
            &deps.config.agent,
            &sources,
            &PromptParts {
                platform: ev.platform,
                session_id: &id,
                started_at: started,
                model: &model,
            },
        );
        let s = Session {
            id,
            lane: self.lane.to_string(),
            parent_id,
            started_at: started.timestamp_millis(),
            ended_at: None,
            end_reason: None,
            system_prompt,
            model,
            compaction_strikes: 0,
            fallback_streak: 0,
            cooldown_until: None,
        };
        deps.store.session_create(lease, &s).await?;
        tracing::info!(session = %s.id, "session opened");
        Ok(s)
    }

    pub(super) async fn turn(
        &self,
        lease: &Lease,
        row: &InboxRow,
        ev: &MessageEvent,
        lost: &CancellationToken,
    ) -> Result<(), Failure> {
        let deps = &self.router.deps;
        let started = Instant::now();
        // A root span: one trace per turn (the worker's `lane` span lives for many turns).
        let span = tracing::info_span!(
            parent: None,
            "turn",
            lane = %self.lane,
            platform = %ev.platform,
            inbox_id = row.id,
            session = tracing::field::Empty,
            turn = tracing::field::Empty,
        );
        // Taken, not borrowed: a turn that fails anywhere leaves the worker knowing nothing.
        let cached = self.known.lock().expect("known lock").take();
        let (session, known) = match cached {
            Some((s, k)) => (s, Some(k)),
            None => {
                let s = self
                    .session(lease, ev)
                    .instrument(tracing::info_span!(parent: &span, "store.session"))
                    .await?;
                (s, None)
            }
        };
        span.record("session", session.id.as_str());
        // The turn row is the lease's in-transaction check: a takeover shows here first. It
        // also stores this start's attempt count, before anything of the turn can crash.
        let attempt = InboxAttempt {
            id: row.id,
            attempt: row.attempts + 1,
        };
        let turn_id = deps
            .store
            .turn_begin(lease, &session.id, Some(attempt))
            .instrument(tracing::info_span!(parent: &span, "lease.turn_begin", lease.holder = %lease.holder, lease.token = lease.token))
            .await?;
        span.record("turn", turn_id);
        // The turn's tool list: MCP servers that came or went since the last turn show here.
        let tools = deps.tools.snapshot();
        // The memory provider hears about a compaction of a private chat before it is written.
        let person = deps.recall.as_ref().and_then(|r| r.person_of(ev));
        let notice = |sid: &str, rows: &[StoredMessage]| {
            if let (Some(r), Some(p)) = (&deps.recall, &person) {
                r.notify_compaction(p, sid, rows);
            }
        };
        let mut context = ContextEngine::new(deps.store.as_ref(), &deps.config).await;
        context.on_compact = Some(&notice);
        let Prepared {
            view: mut history,
            known: mut before,
        } = context
            .prepare_with(lease, &session, &ev.text, &tools, known)
            .instrument(tracing::info_span!(parent: &span, "context.prepare"))
            .await?;
        // The first turn of a session is the first request a person wrote in it: a brief
        // mirrored into a fresh session writes a synthetic user row, which must not count.
        let first_turn = !history.iter().any(|m| m.is_person_request());
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
            .instrument(tracing::info_span!(parent: &span, "hooks.pre_llm"))
            .await;
        let stop = CancellationToken::new();
        self.router
            .running_turns
            .lock()
            .expect("turns lock")
            .insert(self.lane.clone(), stop.clone());
        let activity = Arc::new(super::activity::Activity::new());
        let on_board = ActivityEntry::insert(&self.router, &self.lane, activity.clone());
        let timeout = Duration::from_secs(deps.config.agent.turn_timeout_secs);
        let clock = std::sync::Arc::new(TurnClock::new(timeout));
        let typing = self.typing(ev, stop.clone(), clock.clone());
        super::fault::check(&ev.text);
        let turn_gate = deps.approvals.gate(ev, &clock);
        let gate = super::activity::ActivityGate {
            inner: &turn_gate,
            activity: &activity,
        };
        let tool_ctx = ToolContext {
            lane: self.lane.clone(),
            person: format!("{}:{}", ev.platform.as_str(), ev.sender_id),
            session_id: session.id.clone(),
            turn_id: Some(turn_id),
            inbox_id: Some(row.id),
            call_index: 0,
        };
        let live = super::preview::LiveTurn::start(self, row, ev);
        let in_turn = Some(InTurnBudget {
            budget_tokens: (context.window as f64 * deps.config.context.in_turn_threshold) as usize,
            tail_tokens: context.tail_tokens,
            window: context.window,
        });
        let mut retried = false;
        let outcome = loop {
            let agent = run_turn(
                &deps.chain,
                &tools,
                TurnInput {
                    system_prompt: &session.system_prompt,
                    history: &history,
                    user_content: &ev.text,
                    user_api_content: api_content.as_deref(),
                    max_iterations: deps.config.agent.max_iterations,
                    session_id: &session.id,
                    spill_chars: deps.config.context.spill_chars,
                    tool_ctx: &tool_ctx,
                    approvals: &gate,
                    sink: live.as_ref().map(|l| l.sink()),
                    in_turn,
                    progress: Some(&*activity),
                },
            );
            let outcome = tokio::select! {
                r = agent.instrument(span.clone()) => Outcome::Done(r),
                _ = clock.expired() => Outcome::TimedOut,
                _ = stop.cancelled() => Outcome::Stopped,
                _ = lost.cancelled() => Outcome::Abandoned(Stop::LeaseLost),
                _ = self.router.abort.cancelled() => Outcome::Abandoned(Stop::Shutdown),
            };
            // A provider-confirmed overflow: compact now and retry once; a second overflow
            // (or nothing left to compact) ends the turn with the overflow's own line.
            if let Outcome::Done(Err(TurnError::Llm(e))) = &outcome {
                if e.is_context_overflow() && !retried {
                    retried = true;
                    tracing::warn!(parent: &span, error = %e, "the provider says the prompt does not fit; compacting and retrying once");
                    match context
                        .compact_now(lease, &session, Some(before.clone()))
                        .instrument(tracing::info_span!(parent: &span, "context.overflow"))
                        .await
                    {
                        Ok(Some(p)) => {
                            history = p.view;
                            before = p.known;
                            // The retried answer starts the preview afresh.
                            if let Some(l) = &live {
                                l.sink().restart();
                            }
                            continue;
                        }
                        Ok(None) => {}
                        Err(crate::store::StoreError::LeaseLost { .. }) => {
                            break Outcome::Abandoned(Stop::LeaseLost)
                        }
                        Err(e) => {
                            tracing::warn!(parent: &span, error = %e, "overflow compaction failed; no retry")
                        }
                    }
                }
            }
            break outcome;
        };
        stop.cancel();
        drop(typing);
        if let Some(live) = live {
            live.finish().await;
        }
        self.router
            .running_turns
            .lock()
            .expect("turns lock")
            .remove(&self.lane);
        drop(on_board);

        let mut user = NewMessage::new(Role::User, ev.text.clone());
        user.api_content = api_content;
        user.platform_message_id = Some(ev.platform_message_id.clone());
        let mut messages = vec![user];
        let mut readings = Vec::new();
        if matches!(outcome, Outcome::Stopped | Outcome::TimedOut) {
            let why = match outcome {
                Outcome::Stopped => "Stopped",
                _ => "The turn ran out of time",
            };
            deps.approvals.abandon(&self.lane, row.id, why).await;
        }
        let (reply, status, note) = match outcome {
            Outcome::Abandoned(s) => return Err(Failure::Stop(s)),
            Outcome::Done(Ok(out)) => {
                readings = out.prompt_readings;
                messages.extend(out.messages);
                (out.reply, InboxStatus::Done, None)
            }
            Outcome::Done(Err(crate::agent::turn::TurnError::Llm(
                crate::llm::LlmError::NotConfigured,
            ))) if ev.deliver_to.is_empty() => {
                // Not a failure of this message: the setup line is the answer, kept in the
                // transcript like any reply (the web chat shows it after a reload too). A
                // scheduled run still fails: a setup line is no brief to deliver.
                let line = crate::llm::NOT_CONFIGURED_REPLY.to_string();
                messages.push(NewMessage::new(Role::Assistant, line.clone()));
                (line, InboxStatus::Done, Some("no model configured".to_string()))
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
            // `/stop` answers for it: one message, not two.
            Outcome::Stopped => {
                self.router
                    .stopped
                    .lock()
                    .expect("stopped lock")
                    .insert(self.lane.clone());
                (String::new(), InboxStatus::Done, Some("stopped".to_string()))
            }
        };
        let mut commit = TurnCommit::new(turn_id, &session.id, Some(row.id), status);
        commit.messages = messages;
        commit.note = note;
        match (reply.is_empty(), ev.deliver_to.is_empty()) {
            // A stopped turn: `/stop` answers.
            (true, _) => {}
            (false, true) => commit.outbox = self.outbox_rows(row, &reply, "turn"),
            (false, false) if status == InboxStatus::Done => {
                self.plan_delivery(row, ev, &reply, &mut commit)
            }
            (false, false) => {
                tracing::warn!(parent: &span, "scheduled run failed; nothing delivered")
            }
        }
        if ev.platform == Platform::Cron {
            // Each scheduled fire is its own session.
            commit.close_session = Some("cron_fire".into());
        }
        // The usage anchor names a committed row, so it is computed inside the commit, from
        // the ids the commit assigns, and lands in the same transaction.
        let anchored = std::sync::Mutex::new(None);
        let anchor = |ids: &[i64]| {
            let next = context.anchor_after(
                before.row.clone(),
                &session.id,
                &commit.messages,
                ids,
                &readings,
            );
            *anchored.lock().expect("anchor lock") = next.clone();
            next
        };
        let committed = deps
            .store
            .turn_commit_with(lease, &commit, &anchor)
            .instrument(tracing::info_span!(parent: &span, "store.turn_commit", outbox_rows = commit.outbox.len()))
            .await?;
        deps.outbox_wake.notify_one();
        if commit.close_session.is_none() {
            let Known { mut live, row } = before;
            let now = crate::store::now_ms();
            live.extend(
                commit
                    .messages
                    .iter()
                    .zip(&committed.message_ids)
                    .map(|(m, id)| StoredMessage::committed(*id, &session.id, m, now)),
            );
            let row = anchored.into_inner().expect("anchor lock").unwrap_or(row);
            *self.known.lock().expect("known lock") = Some((session, Known { live, row }));
        }
        let secs = started.elapsed().as_secs_f64();
        metrics::counter!("herald_turns_total", "platform" => ev.platform.as_str(), "status" => status.as_str()).increment(1);
        metrics::histogram!("herald_turn_duration_seconds", "platform" => ev.platform.as_str())
            .record(secs);
        tracing::info!(parent: &span, status = status.as_str(), duration_ms = (secs * 1000.0) as u64, "turn finished");
        Ok(())
    }

    /// The typing indicator, for as long as the returned guard lives (a panicking turn drops
    /// it too).
    fn typing(
        &self,
        ev: &MessageEvent,
        stop: CancellationToken,
        clock: std::sync::Arc<TurnClock>,
    ) -> AbortOnDropHandle<()> {
        let outbound = self.router.deps.outbounds.get(ev.platform).cloned();
        let chat = ev.chat_id.clone();
        let thread = ev.thread_id.clone();
        crate::tasks::spawn_owned(async move {
            let Some(o) = outbound else { return };
            loop {
                // A turn parked on a person is not typing.
                if !clock.is_parked() {
                    o.typing(&chat, thread.as_deref()).await;
                }
                if crate::tasks::sleep_or_cancel(Duration::from_secs(4), &stop)
                    .await
                    .is_err()
                {
                    return;
                }
            }
        })
    }
}
