//! Step 2 of a turn: the agent loop, raced against the turn deadline, `/stop`, the loss of the
//! lease and shutdown; the typing indicator and the streaming preview live exactly as long. A
//! provider-confirmed context overflow compacts and retries once (`after_overflow`).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

use super::{Outcome, Prepared};
use crate::agent::context::in_turn::InTurnBudget;
use crate::agent::context::ContextEngine;
use crate::agent::steer::Steer;
use crate::agent::tools::ToolContext;
use crate::agent::turn::{run_turn, TurnError, TurnInput};
use crate::domain::MessageEvent;
use crate::lanes::activity::{Activity, ActivityEntry, ActivityGate};
use crate::lanes::clock::TurnClock;
use crate::lanes::preview::LiveTurn;
use crate::lanes::steer::LaneSteer;
use crate::lanes::worker::{Stop, Worker};
use crate::store::{InboxRow, Lease, StoreError};

/// What every attempt of one turn shares.
struct Scope<'a> {
    tool_ctx: &'a ToolContext,
    gate: &'a ActivityGate<'a>,
    activity: &'a Activity,
    live: Option<&'a LiveTurn>,
    clock: &'a TurnClock,
    stop: &'a CancellationToken,
    lost: &'a CancellationToken,
    span: &'a tracing::Span,
    /// Mid-turn messages (`None` in `queue` mode).
    steer: Option<&'a LaneSteer<'a>>,
}

/// After an overflow: try again with the compacted history, or end with the overflow.
enum Retry {
    Again,
    No,
    LeaseLost,
}

impl Worker {
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_agent(
        &self,
        lease: &Lease,
        row: &InboxRow,
        ev: &MessageEvent,
        context: &ContextEngine<'_>,
        p: &mut Prepared,
        lost: &CancellationToken,
        span: &tracing::Span,
    ) -> Outcome {
        let deps = &self.router.deps;
        let stop = CancellationToken::new();
        self.router
            .running_turns
            .lock()
            .expect("turns lock")
            .insert(
                self.lane.clone(),
                crate::lanes::router::RunningTurn {
                    stop: stop.clone(),
                    sender: ev.sender_id.clone(),
                },
            );
        let activity = Arc::new(Activity::new());
        let on_board = ActivityEntry::insert(&self.router, &self.lane, activity.clone());
        let clock = Arc::new(TurnClock::new(Duration::from_secs(
            p.agent.config.agent.turn_timeout_secs,
        )));
        let typing = self.typing(ev, stop.clone(), clock.clone());
        crate::lanes::fault::check(&ev.text);
        let turn_gate = deps.approvals.gate(ev, &clock);
        let foreign = std::sync::atomic::AtomicBool::new(false);
        let gate = ActivityGate {
            inner: &turn_gate,
            activity: &activity,
            foreign: &foreign,
        };
        let tool_ctx = ToolContext {
            lane: self.lane.clone(),
            person: ev.person().to_string(),
            session_id: p.session.id.clone(),
            turn_id: Some(p.turn_id),
            inbox_id: Some(row.id),
            call_index: 0,
            turn_files: Vec::new(),
            agent: p.agent.name.clone(),
        };
        let live = LiveTurn::start(self, row, ev, &p.agent.config);
        let steer = LaneSteer::new(self, row, live.as_ref(), &foreign);
        let scope = Scope {
            tool_ctx: &tool_ctx,
            gate: &gate,
            activity: &activity,
            live: live.as_ref(),
            clock: &clock,
            stop: &stop,
            lost,
            span,
            steer: steer.as_ref(),
        };
        let outcome = self.attempts(lease, context, p, &scope).await;
        p.steered = steer.as_ref().map(LaneSteer::taken).unwrap_or_default();
        drop(steer);
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
        outcome
    }

    /// The agent loop, once more after a provider-confirmed overflow; a second overflow (or
    /// nothing left to compact) ends the turn with the overflow's own line.
    async fn attempts(
        &self,
        lease: &Lease,
        context: &ContextEngine<'_>,
        p: &mut Prepared,
        s: &Scope<'_>,
    ) -> Outcome {
        let mut retried = false;
        loop {
            let outcome = self.attempt(context, p, s).await;
            if let Outcome::Done(Err(TurnError::Llm(e))) = &outcome {
                if e.is_context_overflow() && !retried {
                    retried = true;
                    tracing::warn!(parent: s.span, error = %e, "the provider says the prompt does not fit; compacting and retrying once");
                    match self.after_overflow(lease, context, p, s).await {
                        Retry::Again => continue,
                        Retry::No => {}
                        Retry::LeaseLost => return Outcome::Abandoned(Stop::LeaseLost),
                    }
                }
            }
            return outcome;
        }
    }

    async fn attempt(&self, context: &ContextEngine<'_>, p: &Prepared, s: &Scope<'_>) -> Outcome {
        let cfg = &p.agent.config;
        let agent = run_turn(
            &p.agent.chain,
            &p.tools,
            TurnInput {
                system_prompt: &p.session.system_prompt,
                history: &p.history,
                user_content: &p.user.content,
                user_api_content: p.api_content.as_deref(),
                user_parts: &p.user.parts,
                history_images: &p.history_images,
                max_iterations: cfg.agent.max_iterations,
                session_id: &p.session.id,
                spill_chars: cfg.context.spill_chars,
                tool_ctx: s.tool_ctx,
                approvals: s.gate,
                sink: s.live.map(|l| l.sink()),
                meter: Some(&p.meter),
                in_turn: Some(InTurnBudget {
                    budget_tokens: (context.window as f64 * cfg.context.in_turn_threshold) as usize,
                    tail_tokens: context.tail_tokens,
                    window: context.window,
                }),
                progress: Some(s.activity),
                vision: cfg.llm.vision,
                media_cache: &self.router.deps.media_cache,
                steer: s.steer.map(|st| st as &dyn Steer),
            },
        );
        if let Some(steer) = s.steer {
            steer.rewind();
        }
        let interrupted = async {
            match s.steer {
                Some(steer) => steer.interrupt().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = agent.instrument(s.span.clone()) => Outcome::Done(r),
            _ = s.clock.expired() => Outcome::TimedOut(s.clock.budget()),
            _ = s.stop.cancelled() => Outcome::Stopped,
            _ = interrupted => Outcome::Interrupted,
            _ = s.lost.cancelled() => Outcome::Abandoned(Stop::LeaseLost),
            _ = self.router.abort.cancelled() => Outcome::Abandoned(Stop::Shutdown),
        }
    }

    /// Compacts now, with a smaller tail than usual: the last attempt did not fit at all.
    async fn after_overflow(
        &self,
        lease: &Lease,
        context: &ContextEngine<'_>,
        p: &mut Prepared,
        s: &Scope<'_>,
    ) -> Retry {
        match context
            .compact_now(lease, &p.session, Some(p.before.clone()))
            .instrument(tracing::info_span!(parent: s.span, "context.overflow"))
            .await
        {
            Ok(Some(v)) => {
                p.history = v.view;
                p.before = v.known;
                // The retried answer starts the preview afresh.
                if let Some(l) = s.live {
                    l.sink().restart();
                }
                Retry::Again
            }
            Ok(None) => Retry::No,
            Err(StoreError::LeaseLost { .. }) => Retry::LeaseLost,
            Err(e) => {
                tracing::warn!(parent: s.span, error = %e, "overflow compaction failed; no retry");
                Retry::No
            }
        }
    }

    /// The typing indicator, for as long as the returned guard lives (a panicking turn drops
    /// it too).
    fn typing(
        &self,
        ev: &MessageEvent,
        stop: CancellationToken,
        clock: Arc<TurnClock>,
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
