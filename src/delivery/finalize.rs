//! The outbox's side of streaming: a turn's reply chunk whose preview message exists is
//! delivered by editing that message into the exact final chunk, not by sending a copy.
//!
//! This is what keeps "exactly one answer" with previews: the preview is display state, the
//! outbox row is the reply, and the row's delivery turns the one into the other. A resend of
//! the same row (a crash before `mark_sent`) edits the same message to the same text again,
//! so it cannot add a message either. After the reply's last chunk, preview messages the final
//! text does not need (the answer got shorter on a retry) are deleted, and the record is
//! dropped.

use std::sync::Arc;

use super::sender::Sender;
use super::{previews, Outbound, PreviewTarget, SendError};
use crate::store::OutboxRow;

impl Sender {
    /// The recorded preview ids of the reply this row belongs to, read once per delivery;
    /// never for a platform without previews (the web chat): no extra store read there.
    pub(super) async fn previews_for(
        &self,
        outbound: &Arc<dyn Outbound>,
        row: &OutboxRow,
    ) -> Option<Vec<String>> {
        if !outbound.previews() {
            return None;
        }
        self.previews_of(row).await
    }

    /// Sends the row, or finalizes its preview message when it has one.
    pub(super) async fn send_or_finalize(
        &self,
        outbound: &Arc<dyn Outbound>,
        row: &OutboxRow,
        previews: Option<&[String]>,
    ) -> Result<String, SendError> {
        match previews.and_then(|ids| ids.get(row.chunk_index as usize)) {
            Some(id) => {
                let urgency = match super::urgency(row) {
                    super::pace::Urgency::Person => super::pace::Urgency::Final,
                    other => other,
                };
                self.outbounds
                    .pace
                    .wait(row.platform, &row.chat_id, urgency)
                    .await;
                let result = outbound.finalize(row, id).await;
                if result.is_ok() {
                    metrics::counter!("herald_stream_finalized_total", "platform" => row.platform.to_string()).increment(1);
                }
                result
            }
            None => {
                let urgency = super::urgency(row);
                self.outbounds
                    .pace
                    .wait(row.platform, &row.chat_id, urgency)
                    .await;
                outbound.send(row).await
            }
        }
    }

    /// After a chunk was delivered and recorded: when it was its reply's last, the previews
    /// beyond the reply's chunks are deleted and the record forgotten.
    pub(super) async fn after_delivery(
        &self,
        outbound: &Arc<dyn Outbound>,
        row: &OutboxRow,
        ids: &[String],
    ) {
        let Some(inbox_id) = row.inbox_id else { return };
        let chunks = match self.store.outbox_for_inbox(inbox_id).await {
            Ok(rows) => rows
                .iter()
                .filter(|r| previews::is_turn_chunk(&r.idem_key, &r.lane, inbox_id, r.chunk_index))
                .count(),
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the reply's chunks; previews kept");
                return;
            }
        };
        if (row.chunk_index as usize) + 1 < chunks {
            return;
        }
        let to = PreviewTarget {
            chat_id: &row.chat_id,
            thread_id: row.thread_id.as_deref(),
            reply_to: None,
        };
        for id in ids.iter().skip(chunks) {
            if let Err(e) = outbound.preview_delete(&to, id).await {
                tracing::warn!(error = %e, lane = %row.lane, "a preview the answer does not need could not be deleted");
            }
        }
        if let Err(e) = previews::forget(self.store.as_ref(), &row.lane, inbox_id).await {
            tracing::debug!(error = %e, "preview record not dropped");
        }
    }

    /// The recorded preview ids of the turn reply this row belongs to, if any.
    async fn previews_of(&self, row: &OutboxRow) -> Option<Vec<String>> {
        let inbox_id = row.inbox_id?;
        if !previews::is_turn_chunk(&row.idem_key, &row.lane, inbox_id, row.chunk_index) {
            return None;
        }
        match previews::load(self.store.as_ref(), &row.lane, inbox_id).await {
            Ok(ids) if !ids.is_empty() => Some(ids),
            Ok(_) => None,
            Err(e) => {
                // Without the record a send is the safe side: a second message, not a lost one.
                tracing::warn!(error = %e, lane = %row.lane, "cannot read the preview record; sending the chunk as a new message");
                None
            }
        }
    }
}
