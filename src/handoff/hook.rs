//! The trigger: a pre-dispatch hook that turns the bare word `handoff` (or `/wrapup`) into a
//! background capsule build and an immediate acknowledgement in the chat.
//!
//! It re-checks authorization itself (a hook that spends model calls must not rely on its place
//! in the chain) and ignores internal events, media and cron lanes. At most one build per lane
//! runs at a time, across replicas: the claim lives in the store. The hook never waits for the
//! writer model; the lane keeps serving while the capsule is written.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::builder::{BuildJob, Builder};
use super::{dialogue_count, is_handoff_word, is_wrapup_command, BuildStatus, MIN_MESSAGES};
use crate::domain::{MessageEvent, MessageKind};
use crate::hooks::{Authorizer, HookOutcome, PreDispatchHook};

pub const ACK: &str = "Writing a handoff capsule of this session now. When it is done this \
     session closes, and your next message starts a fresh one that carries on from the capsule.";
pub const ALREADY: &str =
    "A handoff is already being written for this conversation; it will be ready shortly.";

/// The pure half of the decision: a typed text or command message that is exactly the
/// trigger, in a lane a person talks in. Whether the sender may use the agent is checked
/// separately (it may need the store: senders approved through pairing).
pub fn is_handoff_request(ev: &MessageEvent) -> bool {
    ev.is_person(&[MessageKind::Text, MessageKind::Command])
        && !ev.lane().is_cron()
        && (is_handoff_word(&ev.text) || is_wrapup_command(&ev.text, None))
}

pub struct HandoffHook {
    auth: Authorizer,
    builder: Arc<Builder>,
    tracker: TaskTracker,
    cancel: CancellationToken,
}

impl HandoffHook {
    pub fn new(
        auth: Authorizer,
        builder: Arc<Builder>,
        tracker: TaskTracker,
        cancel: CancellationToken,
    ) -> HandoffHook {
        HandoffHook {
            auth,
            builder,
            tracker,
            cancel,
        }
    }

    fn skip(reason: &str, reply: Option<String>) -> HookOutcome {
        HookOutcome::Skip {
            reason: reason.to_string(),
            reply,
        }
    }

    async fn start(&self, ev: &MessageEvent) -> HookOutcome {
        let b = &self.builder;
        let lane = ev.lane();
        let session =
            match b.store.session_current(&lane).await {
                Ok(Some(s)) => s,
                Ok(None) => return Self::skip(
                    "nothing to hand off",
                    Some(
                        "There is nothing to hand off yet: this conversation has no open session."
                            .into(),
                    ),
                ),
                Err(e) => return unavailable(&e),
            };
        let job = BuildJob::for_event(ev, &session.id, b.payer_of(ev));
        // Checked here, not only in the build, so a person gets one clear answer instead of an
        // acknowledgement followed by a refusal.
        let count = match b.transcript(&session.id).await {
            Ok(lines) => dialogue_count(&lines),
            Err(e) => return unavailable(&e),
        };
        if count < MIN_MESSAGES {
            if let Err(e) = b
                .finish(&job, BuildStatus::TooShort, String::new(), count)
                .await
            {
                tracing::warn!(error = %e, "could not record a too-short handoff");
            }
            return Self::skip(
                "too short",
                Some(format!(
                    "Nothing worth handing off yet: this session has {count} message(s), a handoff needs at least {MIN_MESSAGES}."
                )),
            );
        }
        let holder = format!("{}/{}", b.replica_id, uuid::Uuid::new_v4().simple());
        let ttl = Duration::from_secs(b.config.build_timeout_secs);
        match b.store.handoff_claim(&lane, &holder, ttl).await {
            Ok(true) => {}
            Ok(false) => {
                metrics::counter!("herald_capsule_builds_total", "status" => BuildStatus::AlreadyRunning.as_str()).increment(1);
                tracing::info!(lane = %lane, status = "already_running", "handoff requested while one is being written");
                return Self::skip("already running", Some(ALREADY.into()));
            }
            Err(e) => return unavailable(&e),
        }
        let builder = b.clone();
        let cancel = self.cancel.child_token();
        self.tracker.spawn(async move {
            if let Err(e) = builder.build(&job, &cancel).await {
                tracing::error!(lane = %job.lane, session = %job.session_id, error = %e, "capsule build failed in the store");
            }
            if let Err(e) = builder.store.handoff_release(&job.lane, &holder).await {
                tracing::warn!(lane = %job.lane, error = %e, "build claim not released; it expires");
            }
        });
        Self::skip("capsule build started", Some(ACK.into()))
    }
}

fn unavailable(e: &crate::store::StoreError) -> HookOutcome {
    tracing::warn!(error = %e, "handoff could not start");
    HookOutcome::Skip {
        reason: "store unavailable".into(),
        reply: Some(
            "The handoff could not start (the store is unavailable); please try again.".into(),
        ),
    }
}

#[async_trait]
impl PreDispatchHook for HandoffHook {
    fn name(&self) -> &'static str {
        "handoff"
    }

    fn claims(&self, ev: &MessageEvent) -> bool {
        self.builder.config.enabled && is_handoff_request(ev)
    }

    async fn on_event(&self, ev: &MessageEvent) -> HookOutcome {
        if !self.builder.config.enabled {
            return HookOutcome::Continue;
        }
        if !is_handoff_request(ev) {
            return HookOutcome::Continue;
        }
        if !self
            .auth
            .is_allowed_or_paired(ev, &*self.builder.store)
            .await
        {
            tracing::info!(platform = %ev.platform, sender = %ev.sender_id, "handoff from a sender who is not allowed; dropped");
            return Self::skip("unauthorized", None);
        }
        self.start(ev).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Origin, Platform};

    #[test]
    fn request_table() {
        let ev = |platform: Platform, text: &str| MessageEvent::text(platform, "1", "42", text);
        let mut internal = ev(Platform::named("telegram"), "handoff");
        internal.origin = Origin::Scheduled {
            deliver_to: Vec::new(),
        };
        let mut media = ev(Platform::named("telegram"), "handoff");
        media.origin = Origin::person(MessageKind::Media);
        let mut edited = ev(Platform::named("telegram"), "handoff");
        edited.origin = Origin::person(MessageKind::Edited);
        let mut command = ev(Platform::named("telegram"), "/wrapup@HeraldBot");
        command.origin = Origin::person(MessageKind::Command);
        let cases: Vec<(&str, MessageEvent, bool)> = vec![
            ("word", ev(Platform::named("telegram"), "Handoff."), true),
            ("shouted", ev(Platform::named("discord"), "HAND-OFF!"), true),
            ("wrapup command", command, true),
            ("web", ev(Platform::WEB, "hand off"), true),
            (
                "sentence",
                ev(Platform::named("telegram"), "handoff now please"),
                false,
            ),
            (
                "question",
                ev(Platform::WEB, "can you do a handoff for me?"),
                false,
            ),
            (
                "other feature",
                ev(Platform::named("telegram"), "/handoff telegram"),
                false,
            ),
            ("internal", internal, false),
            ("media caption", media, false),
            ("edited message", edited, false),
            ("cron lane", ev(Platform::CRON, "handoff"), false),
        ];
        for (name, ev, want) in cases {
            assert_eq!(is_handoff_request(&ev), want, "{name}");
        }
    }
}
