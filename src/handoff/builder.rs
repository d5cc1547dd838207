//! The capsule build: read the session, ask the writer model, validate, trim, store the capsule
//! with its pending marker, report the status, then rotate the lane's session.
//!
//! Runs in the background, outside the lane worker, so it never writes the transcript itself:
//! the session is closed by a `RotateSession` control event that goes through the lane's inbox
//! and runs under the lane lease. A build that produced no real summary must say so outside the
//! text — `degraded` in the log line, the metric, the store row (API and CLI) and a note in the
//! chat. A confidential lane never falls back to the transcript.

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{
    assemble, dialogue_count, fallback_capsule, recovery_section_read, scrub_confidential,
    validate_writer_output, writer_input, writer_input_count, writer_prompt, BuildStatus,
    TranscriptLine,
};
use crate::config::HandoffConfig;
use crate::domain::{Control, LaneKey, MessageEvent, Payer, Platform, Role, SessionId};
use crate::lanes::Ingest;
use crate::llm::{ChatMessage, ChatRequest, ProviderChain};
use crate::store::{NewCapsule, Store, StoreError};

/// Which conversation and session a build is for. The chat coordinates are kept so that the
/// rotation event and any note reach the same chat (the lane key alone is one-way).
#[derive(Debug, Clone)]
pub struct BuildJob {
    pub lane: LaneKey,
    pub platform: Platform,
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub session_id: SessionId,
    pub trigger: Trigger,
    /// Who pays for the writer's call: the person who asked, or the system for the nightly
    /// closer.
    pub payer: Payer,
    /// The agent whose next session receives the capsule. `None`: the agent of the session it
    /// wraps (`Session.agent`); `/agent NAME` names the new agent, the explicit carry-over.
    pub agent: Option<String>,
}

/// What started a build: named in the log line; only a person who asked is told in the chat
/// when the build went wrong (the nightly closer stays silent: nobody asked at 3 am).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The `handoff` word or `/wrapup`.
    Manual,
    /// The nightly closer.
    Nightly,
    /// `/agent NAME`: the session is carried over to another agent (the command answers).
    Switch,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Manual => "manual",
            Trigger::Nightly => "nightly",
            Trigger::Switch => "agent",
        }
    }

    /// The summarized session's end reason: an operator can tell a session the person closed
    /// from one the nightly closer closed.
    pub fn end_reason(self) -> &'static str {
        match self {
            Trigger::Manual => "handoff",
            Trigger::Nightly => "nightly",
            Trigger::Switch => "agent",
        }
    }
}

impl BuildJob {
    /// The build `ev` asked for, paid by `payer` (its sender).
    pub fn for_event(ev: &MessageEvent, session_id: &SessionId, payer: Payer) -> BuildJob {
        BuildJob {
            lane: ev.lane(),
            platform: ev.platform,
            chat_id: ev.chat_id.clone(),
            thread_id: ev.thread_id.clone(),
            session_id: session_id.clone(),
            trigger: Trigger::Manual,
            payer,
            agent: None,
        }
    }
}

/// What a finished build reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildReport {
    pub status: BuildStatus,
    pub capsule_id: Option<i64>,
}

pub struct Builder {
    pub(super) store: Arc<dyn Store>,
    writer: ProviderChain,
    pub(super) config: HandoffConfig,
    /// This replica's name, the prefix of every build claim's holder.
    pub(super) replica_id: String,
    /// Queues the rotation and the notes as inbox events of the lane.
    ingest: Ingest,
    /// Prices and caps the writer's call, attributed to the lane it wraps up.
    budget: Option<Arc<crate::budget::Budget>>,
}

impl Builder {
    pub fn new(
        store: Arc<dyn Store>,
        writer: ProviderChain,
        config: HandoffConfig,
        replica_id: String,
        ingest: Ingest,
    ) -> Builder {
        Builder {
            store,
            writer,
            config,
            replica_id,
            ingest,
            budget: None,
        }
    }

    /// Who pays for a build `ev` asked for: its sender (the system when no budget is kept,
    /// as nothing is metered then).
    pub fn payer_of(&self, ev: &MessageEvent) -> Payer {
        self.budget.as_ref().map_or(Payer::System, |b| {
            b.payer_of(ev.platform.as_str(), &ev.sender_id)
        })
    }

    /// Meters the writer's calls with `budget` (the same ledger as the turns').
    pub fn with_budget(mut self, budget: Arc<crate::budget::Budget>) -> Builder {
        self.budget = Some(budget);
        self
    }

    /// The session's user/assistant lines as the writer sees them: the whole session,
    /// compacted rows included, each message once (see [`super::dialogue`]).
    pub(super) async fn transcript(
        &self,
        session_id: &SessionId,
    ) -> Result<Vec<TranscriptLine>, StoreError> {
        let rows = self.store.messages(session_id, false).await?;
        Ok(super::dialogue::session_dialogue(&rows))
    }

    /// The agent the capsule is for: the job's, else the wrapped session's.
    async fn agent_of(&self, job: &BuildJob) -> Result<String, StoreError> {
        if let Some(a) = &job.agent {
            return Ok(a.clone());
        }
        let session = self.store.session_get(&job.session_id).await?;
        Ok(session.map_or_else(|| crate::config::DEFAULT_AGENT.to_string(), |s| s.agent))
    }

    /// The capsule `/agent` writes of the session it leaves, for the new agent (`job.agent`),
    /// run to its end before the command answers so the new session finds it. `None` when
    /// handoff is off, the session is too short, or another build of the lane is running.
    pub async fn carry_over(
        &self,
        job: &BuildJob,
        cancel: &CancellationToken,
    ) -> Result<Option<BuildReport>, StoreError> {
        let lines = self.transcript(&job.session_id).await?;
        if !self.config.enabled || dialogue_count(&lines) < super::MIN_MESSAGES {
            return Ok(None);
        }
        let holder = format!("{}/{}", self.replica_id, uuid::Uuid::new_v4().simple());
        let ttl = std::time::Duration::from_secs(self.config.build_timeout_secs);
        if !self.store.handoff_claim(&job.lane, &holder, ttl).await? {
            return Ok(None);
        }
        let built = self.build(job, cancel).await;
        if let Err(e) = self.store.handoff_release(&job.lane, &holder).await {
            tracing::warn!(lane = %job.lane, error = %e, "build claim not released; it expires");
        }
        built
    }

    /// Runs one build to its end, unless `cancel` fires first (then nothing is stored).
    pub async fn build(
        &self,
        job: &BuildJob,
        cancel: &CancellationToken,
    ) -> Result<Option<BuildReport>, StoreError> {
        let lines = self.transcript(&job.session_id).await?;
        let count = dialogue_count(&lines);
        if count < super::MIN_MESSAGES {
            return self
                .finish(job, BuildStatus::TooShort, String::new(), count)
                .await
                .map(Some);
        }
        let confidential = self.config.is_confidential(job.lane.as_str());
        let agent = self.agent_of(job).await?;
        let previous = self
            .store
            .capsule_latest_written_for(&job.lane, Some(&agent))
            .await?
            .map(|c| c.text);
        let (system, user) =
            writer_prompt(&writer_input(&lines), previous.as_deref(), confidential);
        let req = ChatRequest {
            messages: vec![
                ChatMessage::new(Role::System, system),
                ChatMessage::new(Role::User, user),
            ],
            tools: Vec::new(),
        };
        let meter = self.budget.as_ref().map(|b| {
            b.meter(crate::budget::Charge::new(
                job.lane.to_string(),
                job.payer.clone(),
                "capsule",
            ))
        });
        let opts = crate::llm::CallOpts {
            sink: None,
            meter: meter.as_ref().map(|m| m as &dyn crate::llm::Meter),
        };
        let reply = tokio::select! {
            r = self.writer.call(&req, opts) => r,
            _ = cancel.cancelled() => {
                tracing::info!(lane = %job.lane, session = %job.session_id, "capsule build cancelled by shutdown");
                return Ok(None);
            }
        };
        let written = match reply {
            Ok(resp) => validate_writer_output(resp.content.as_deref().unwrap_or_default())
                .map_err(|e| e.to_string()),
            Err(e) => Err(format!("writer model failed: {e}")),
        };
        let recovery = recovery_section_read(&job.session_id, count, writer_input_count(&lines));
        let (status, text) = match (written, confidential) {
            (Ok(body), false) => (BuildStatus::Ok, assemble(&body, Some(&recovery))),
            (Ok(body), true) => match validate_writer_output(&scrub_confidential(&body)) {
                Ok(clean) => (BuildStatus::Ok, assemble(&clean, None)),
                Err(e) => {
                    tracing::warn!(lane = %job.lane, error = %e, "scrubbed capsule is no longer capsule-shaped");
                    (BuildStatus::ScrubFailed, String::new())
                }
            },
            (Err(why), false) => {
                tracing::warn!(lane = %job.lane, reason = %why, "no usable capsule from the writer; storing the transcript fallback");
                (
                    BuildStatus::Degraded,
                    assemble(&fallback_capsule(&lines), Some(&recovery)),
                )
            }
            (Err(why), true) => {
                tracing::warn!(lane = %job.lane, reason = %why, "no usable capsule from the writer; a confidential lane gets no fallback");
                (BuildStatus::WriteFailed, String::new())
            }
        };
        self.finish(job, status, text, count).await.map(Some)
    }

    /// Stores the outcome (with the pending marker when a capsule was written), reports it, and
    /// for a written capsule exports it and rotates the session.
    pub(super) async fn finish(
        &self,
        job: &BuildJob,
        status: BuildStatus,
        text: String,
        count: usize,
    ) -> Result<BuildReport, StoreError> {
        let capsule = NewCapsule {
            lane: job.lane.clone(),
            session_id: job.session_id.clone(),
            status,
            text,
            message_count: count as i64,
            confidential: self.config.is_confidential(job.lane.as_str()),
            created_at: crate::store::now_ms(),
            agent: self.agent_of(job).await?,
        };
        let id = match self
            .store
            .capsule_put(&capsule, status.wrote_capsule())
            .await
        {
            Ok(id) => id,
            Err(e) => {
                metrics::counter!("herald_capsule_builds_total", "status" => BuildStatus::WriteFailed.as_str()).increment(1);
                tracing::error!(lane = %job.lane, session = %job.session_id, trigger = job.trigger.as_str(), status = "write_failed", error = %e, "capsule could not be stored");
                return Err(e);
            }
        };
        metrics::counter!("herald_capsule_builds_total", "status" => status.as_str()).increment(1);
        let chars = capsule.text.chars().count();
        if status == BuildStatus::Ok {
            tracing::info!(lane = %job.lane, session = %job.session_id, trigger = job.trigger.as_str(), messages = count, chars, capsule = id, status = status.as_str(), "handoff capsule written");
        } else {
            tracing::warn!(lane = %job.lane, session = %job.session_id, trigger = job.trigger.as_str(), messages = count, chars, capsule = id, status = status.as_str(), "handoff capsule build did not produce a summary");
        }
        if let Some(note) = chat_note(status).filter(|_| job.trigger == Trigger::Manual) {
            self.notify(job, id, note).await;
        }
        if status.wrote_capsule() {
            if let Some(dir) = &self.config.export_dir {
                if let Err(e) = export(dir, &job.lane, &capsule.text).await {
                    tracing::warn!(lane = %job.lane, dir = %dir.display(), error = %e, "capsule export failed");
                }
            }
            self.rotate(job, id).await?;
        }
        Ok(BuildReport {
            status,
            capsule_id: Some(id),
        })
    }

    /// Closes the summarized session under the lane lease, through the lane's inbox.
    async fn rotate(&self, job: &BuildJob, capsule_id: i64) -> Result<(), StoreError> {
        let ev = MessageEvent::control(
            job.platform,
            &job.chat_id,
            job.thread_id.as_deref(),
            &format!("handoff:{}:{capsule_id}", job.lane),
            Control::RotateSession {
                session_id: job.session_id.clone(),
                reason: job.trigger.end_reason().into(),
            },
        );
        self.ingest.ingest(&ev).await.map(|_| ())
    }

    /// Tells the chat, through the lane's inbox: the worker queues the note under the lane's
    /// lease (after any turn in flight), like every write into a lane.
    async fn notify(&self, job: &BuildJob, capsule_id: i64, text: &str) {
        let key = format!("handoff:{}:{capsule_id}:note", job.lane);
        let ev = MessageEvent::control(
            job.platform,
            &job.chat_id,
            job.thread_id.as_deref(),
            &key,
            Control::Notice {
                key: key.clone(),
                text: text.to_string(),
            },
        );
        let queued = self.ingest.ingest(&ev).await.map(|_| ());
        if let Err(e) = queued {
            tracing::warn!(lane = %job.lane, error = %e, "could not queue the handoff note");
        }
    }
}

/// What the person is told after the acknowledgement, when the build did not go as promised.
fn chat_note(status: BuildStatus) -> Option<&'static str> {
    match status {
        BuildStatus::Degraded => Some(
            "The handoff was saved, but the writer model did not produce a summary: the next \
             session gets the filtered transcript instead (status: degraded).",
        ),
        BuildStatus::WriteFailed | BuildStatus::ScrubFailed => Some(
            "The handoff could not be written (the writer model failed); this session stays \
             open. You can try again later.",
        ),
        _ => None,
    }
}

/// Writes `handoff-<lane>.md` atomically (temp file, then rename): a watchdog never reads half
/// a capsule.
async fn export(dir: &Path, lane: &LaneKey, text: &str) -> std::io::Result<()> {
    tokio::fs::create_dir_all(dir).await?;
    let path = dir.join(format!("handoff-{lane}.md"));
    let tmp = dir.join(format!(".handoff-{lane}.md.tmp"));
    tokio::fs::write(&tmp, text).await?;
    tokio::fs::rename(&tmp, &path).await
}
