//! What a finished turn sends: its reply as outbox chunks in the asker's chat, or, for a
//! scheduled run, a brief to each target plus a mirror of it into each target lane. Keys are
//! derived from (lane, inbox event, chunk), so a re-run of the same event can never queue a
//! chunk twice.

use super::worker::Worker;
use crate::domain::cron::{is_silent, Target};
use crate::domain::{Attachment, Control, MessageEvent};
use crate::store::{InboxRow, NewOutbox, OutboxKey, ReplyKey, TurnCommit};

impl Worker {
    /// Reply chunks with keys derived from (lane, inbox event, chunk): a re-run of the same
    /// event produces the same keys, so a chunk can never be queued twice.
    pub(super) fn outbox_rows(&self, row: &InboxRow, text: &str, kind: &str) -> Vec<NewOutbox> {
        reply_rows(&self.router.deps, &self.lane, row, text, kind)
    }

    /// Briefs for every target of a scheduled run, and a mirror event per target lane. A reply
    /// that is exactly `[SILENT]` delivers nothing.
    pub(super) fn plan_delivery(
        &self,
        row: &InboxRow,
        ev: &MessageEvent,
        reply: &str,
        commit: &mut TurnCommit,
    ) {
        if is_silent(reply) {
            commit.note = Some("silent".into());
            return;
        }
        let label = ev.chat_id.clone();
        for target in ev.deliver_to() {
            let Target {
                platform,
                chat,
                thread,
            } = target.clone();
            let lane = target.lane_key();
            for (i, chunk) in self
                .router
                .deps
                .outbounds
                .split(platform, reply)
                .into_iter()
                .enumerate()
            {
                commit.outbox.push(NewOutbox {
                    key: OutboxKey::chunk(ReplyKey::brief(&lane, &self.lane, row.id), i),
                    lane: lane.clone(),
                    platform,
                    chat_id: chat.clone(),
                    thread_id: thread.clone(),
                    reply_to: None,
                    inbox_id: Some(row.id),
                    chunk_index: i as i64,
                    text: chunk,
                    media: None,
                });
            }
            commit.enqueue.push(MessageEvent::control(
                platform,
                &chat,
                thread.as_deref(),
                &format!("mirror:{}:{}:{lane}", self.lane, row.id),
                Control::Mirror {
                    label: label.clone(),
                    text: reply.to_string(),
                },
            ));
        }
    }
}

/// The chunks of `text` answering `row`, keyed by (lane, inbox id, kind, chunk): whoever
/// queues the same answer twice (the `/status` fast path and the worker) queues it once.
pub(super) fn reply_rows(
    deps: &super::Deps,
    lane: &crate::domain::LaneKey,
    row: &InboxRow,
    text: &str,
    kind: &str,
) -> Vec<NewOutbox> {
    let ev = &row.event;
    deps.outbounds
        .split(ev.platform, text)
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| NewOutbox {
            key: OutboxKey::chunk(ReplyKey::answer(lane, row.id, kind), i),
            lane: lane.clone(),
            platform: ev.platform,
            chat_id: ev.chat_id.clone(),
            thread_id: ev.thread_id.clone(),
            reply_to: Some(ev.platform_message_id.clone()),
            inbox_id: Some(row.id),
            chunk_index: i as i64,
            text: chunk,
            media: None,
        })
        .collect()
}

/// One row per file of a turn's reply, after its `chunks` text rows, keyed by (lane, inbox
/// id, file index): the same reply of a re-run queues each file once.
pub(super) fn file_rows(
    lane: &crate::domain::LaneKey,
    row: &InboxRow,
    files: &[Attachment],
    chunks: usize,
) -> Vec<NewOutbox> {
    let ev = &row.event;
    files
        .iter()
        .enumerate()
        .map(|(i, file)| NewOutbox {
            key: OutboxKey::file(ReplyKey::answer(lane, row.id, "turn"), i),
            lane: lane.clone(),
            platform: ev.platform,
            chat_id: ev.chat_id.clone(),
            thread_id: ev.thread_id.clone(),
            reply_to: None,
            inbox_id: Some(row.id),
            chunk_index: (chunks + i) as i64,
            text: String::new(),
            media: Some(file.clone()),
        })
        .collect()
}
