//! The live preview of one turn's answer: the sink the agent loop writes deltas into, and the
//! task that shows the latest text in the chat as one message edited in place.
//!
//! The first preview message goes out as soon as there is text (plain text: a half-written
//! answer may hold half a Markdown construct); then the message is edited, only when the text
//! changed and never faster than the chat's edit pace (`delivery::pace`, shared with the
//! outbox's final edit). Past the platform's length limit the text is split with the
//! platform's own rule (`Outbound::split`, the one the outbox uses): message `i` shows chunk
//! `i`, so earlier messages freeze at a clean split point and the answer continues in a new
//! one. Each preview message id is recorded in the store the moment it is known
//! (`delivery::previews`): the outbox edits those messages into the final chunks, and a retried
//! turn edits them again instead of sending new ones.
//!
//! Must not: write anything to the transcript, or hold up the turn — a preview that fails just
//! stops, and the outbox still delivers the answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use super::stream_hub::{StreamHub, StreamKind};
use super::worker::Worker;
use crate::delivery::pace::{Pace, Urgency};
use crate::delivery::{previews, Outbound, PreviewTarget, SendError};
use crate::domain::{LaneKey, MessageEvent, Platform};
use crate::llm::DeltaSink;
use crate::store::{InboxRow, Store};

/// What the preview should show now.
#[derive(Default)]
struct Shown {
    text: String,
    reasoning: String,
    /// A line above the answer: a correction joined the turn.
    note: Option<&'static str>,
}

/// The preview's line once a mid-turn message joined the turn.
pub(super) const CORRECTED: &str = "↪ taking your correction into account";

struct LiveSink {
    inbox_id: i64,
    hub: StreamHub,
    shown: watch::Sender<Shown>,
    show_reasoning: bool,
}

impl DeltaSink for LiveSink {
    fn text(&self, delta: &str) {
        self.hub
            .publish(self.inbox_id, StreamKind::Text(delta.to_string()));
        self.shown.send_modify(|s| s.text.push_str(delta));
    }

    fn reasoning(&self, delta: &str) {
        if self.show_reasoning {
            self.hub
                .publish(self.inbox_id, StreamKind::Reasoning(delta.to_string()));
            self.shown.send_modify(|s| s.reasoning.push_str(delta));
        }
    }

    fn restart(&self) {
        self.hub.publish(self.inbox_id, StreamKind::Restart);
        self.shown.send_modify(|s| {
            s.text.clear();
            s.reasoning.clear();
        });
    }
}

/// A streamed turn's sink and its chat preview, for as long as the turn runs.
pub(super) struct LiveTurn {
    sink: Arc<LiveSink>,
    stop: CancellationToken,
    task: Option<AbortOnDropHandle<()>>,
}

/// How long a finished turn waits for an edit in flight before it commits.
const FINISH_WAIT: Duration = Duration::from_secs(5);

impl LiveTurn {
    /// `None` when streaming is off in this chat (`streaming.chats`: private chats by default),
    /// and for scheduled runs (their briefs go to other chats).
    pub(super) fn start(
        worker: &Worker,
        row: &InboxRow,
        ev: &MessageEvent,
        config: &crate::config::Config,
    ) -> Option<LiveTurn> {
        let deps = &worker.router.deps;
        let cfg = &config.streaming;
        if !cfg.streams_in(ev.chat_type)
            || !ev.deliver_to().is_empty()
            || ev.platform == Platform::CRON
        {
            return None;
        }
        let (tx, rx) = watch::channel(Shown::default());
        let sink = Arc::new(LiveSink {
            inbox_id: row.id,
            hub: worker.router.hub.clone(),
            shown: tx,
            show_reasoning: cfg.show_reasoning,
        });
        let stop = CancellationToken::new();
        let task = deps
            .outbounds
            .get(ev.platform)
            .filter(|o| o.previews())
            .map(|outbound| {
                let preview = Preview {
                    outbound: outbound.clone(),
                    pace: deps.outbounds.pace.clone(),
                    store: deps.store.clone(),
                    lane: worker.lane.clone(),
                    inbox_id: row.id,
                    platform: ev.platform,
                    chat_id: ev.chat_id.clone(),
                    thread_id: ev.thread_id.clone(),
                    reply_to: ev.platform_message_id.clone(),
                    stop: stop.clone(),
                    rx,
                    started: Instant::now(),
                };
                crate::tasks::spawn_owned(preview.run())
            });
        Some(LiveTurn { sink, stop, task })
    }

    pub(super) fn sink(&self) -> &dyn DeltaSink {
        self.sink.as_ref()
    }

    /// A mid-turn message joined the turn: the preview says so above the answer.
    pub(super) fn corrected(&self) {
        self.sink.shown.send_modify(|s| s.note = Some(CORRECTED));
    }

    /// Stops the preview; an edit in flight may land first, so the outbox's final edit is
    /// the last word. Nothing waits for a pace slot here: a preview that has not started its
    /// next edit gives it up, so the worker's slot is held for at most one request.
    pub(super) async fn finish(mut self) {
        self.stop.cancel();
        if let Some(task) = &mut self.task {
            let _ = tokio::time::timeout(FINISH_WAIT, task).await;
        }
    }
}

struct Preview {
    outbound: Arc<dyn Outbound>,
    pace: Arc<Pace>,
    store: Arc<dyn Store>,
    lane: LaneKey,
    inbox_id: i64,
    platform: Platform,
    chat_id: String,
    thread_id: Option<String>,
    reply_to: String,
    stop: CancellationToken,
    rx: watch::Receiver<Shown>,
    started: Instant,
}

/// Reasoning shown while no answer text exists yet: its newest part only.
const REASONING_TAIL_CHARS: usize = 600;

impl Preview {
    async fn run(mut self) {
        // A retried turn (after a crash or a lost lease) edits the previews its first run sent.
        let mut ids = previews::load(self.store.as_ref(), &self.lane, self.inbox_id)
            .await
            .unwrap_or_default();
        // What each message shows; `None` for messages of an earlier run (unknown text).
        let mut shown: Vec<Option<String>> = vec![None; ids.len()];
        let platform = self.platform.as_str();
        loop {
            tokio::select! {
                changed = self.rx.changed() => if changed.is_err() { return },
                _ = self.stop.cancelled() => return,
            }
            loop {
                if !self.ready().await {
                    return;
                }
                let text = self.render();
                if text.trim().is_empty() {
                    break;
                }
                let chunks = self.outbound.split(&text);
                let Some(i) = (0..chunks.len()).find(|&i| {
                    shown
                        .get(i)
                        .is_none_or(|s| s.as_deref() != Some(&chunks[i]))
                }) else {
                    break;
                };
                // The first words answer the person; every later message or edit is bulk.
                let urgency = match i == 0 && ids.is_empty() {
                    true => Urgency::Person,
                    false => Urgency::Preview,
                };
                // A finished turn does not wait for a pace slot: its final edit supersedes
                // this one, and the worker waits for the preview to stop before it commits.
                tokio::select! {
                    _ = self.pace.wait(self.platform, &self.chat_id, urgency) => {}
                    _ = self.stop.cancelled() => return,
                }
                if self.stop.is_cancelled() {
                    return;
                }
                let to = PreviewTarget {
                    chat_id: &self.chat_id,
                    thread_id: self.thread_id.as_deref(),
                    reply_to: (i == 0).then_some(self.reply_to.as_str()),
                };
                let result = if i < ids.len() {
                    self.outbound
                        .preview_edit(&to, &ids[i], &chunks[i])
                        .await
                        .map(|()| None)
                } else {
                    self.outbound.preview_send(&to, &chunks[i]).await.map(Some)
                };
                match result {
                    Ok(None) => {
                        shown[i] = Some(chunks[i].clone());
                        metrics::counter!("herald_stream_edits_total", "platform" => platform.to_string())
                            .increment(1);
                    }
                    Ok(Some(id)) => {
                        if ids.is_empty() {
                            metrics::histogram!("herald_stream_first_preview_seconds", "platform" => platform.to_string())
                                .record(self.started.elapsed().as_secs_f64());
                        }
                        metrics::counter!("herald_stream_previews_total", "platform" => platform.to_string())
                            .increment(1);
                        ids.push(id);
                        shown.push(Some(chunks[i].clone()));
                        // Recorded at once: the outbox must find it, and so must a retry.
                        self.record(&ids).await;
                    }
                    Err(SendError::RetryAfter(d)) => {
                        if crate::tasks::sleep_or_cancel(d, &self.stop).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        // The outbox still delivers the answer; the preview just stops.
                        tracing::warn!(error = %e, lane = %self.lane, "preview failed; the answer will arrive when it is complete");
                        return;
                    }
                }
            }
        }
    }

    /// Sleeps until the chat's pace would let an edit go; false when the preview was stopped.
    async fn ready(&self) -> bool {
        let wait = self.pace.ready_in(self.platform, &self.chat_id);
        wait.is_zero()
            || crate::tasks::sleep_or_cancel(wait, &self.stop)
                .await
                .is_ok()
    }

    /// Stores the preview ids, retrying a brief store outage: an unrecorded preview becomes a
    /// second message when the outbox sends the answer.
    async fn record(&self, ids: &[String]) {
        let mut backoff = crate::tasks::Backoff::new(Duration::from_millis(100), Duration::MAX);
        for attempt in 1..=5 {
            match previews::save(self.store.as_ref(), &self.lane, self.inbox_id, ids).await {
                Ok(()) => return,
                Err(e) if attempt == 5 => {
                    tracing::warn!(error = %e, lane = %self.lane, "preview message not recorded; the answer may arrive as a second message");
                }
                Err(_) => backoff.pause().await,
            }
        }
    }

    /// The text to show: the answer so far, or (configured) the newest reasoning before it.
    fn render(&self) -> String {
        let s = self.rx.borrow();
        let body = self.body(&s);
        match s.note {
            Some(note) => format!("{note}\n\n{body}").trim_end().to_string(),
            None => body,
        }
    }

    fn body(&self, s: &Shown) -> String {
        if !s.text.trim().is_empty() || s.reasoning.trim().is_empty() {
            return s.text.clone();
        }
        let skip = s
            .reasoning
            .chars()
            .count()
            .saturating_sub(REASONING_TAIL_CHARS);
        let tail: String = s.reasoning.chars().skip(skip).collect();
        format!("Thinking…\n{tail}")
    }
}
