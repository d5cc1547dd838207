//! Step 0 of a turn with attachments: read them (fetch, transcribe, extract) before anything
//! of the turn is written, and the history's images still in view. A message whose files all
//! failed and that has no words of its own gets Herald's own answer, recorded with the
//! message under the lane's lease, and no model call.
//!
//! The user row of that answer is Herald's account of the files, not words the person wrote,
//! so it carries no platform message id: it never passes for the session's first request (a
//! pending handoff capsule waits for the first message the model answers).

use tracing::Instrument;

use crate::domain::{MessageEvent, Role};
use crate::lanes::worker::{Failure, Worker};
use crate::media::images::HistoryImages;
use crate::media::Reading;
use crate::store::{
    InboxAttempt, InboxRow, InboxStatus, Lease, NewMessage, StoredMessage, TurnCommit,
};

impl Worker {
    /// What the message's attachments say (nothing to read: an empty reading).
    pub(super) async fn read_media(&self, ev: &MessageEvent, span: &tracing::Span) -> Reading {
        if ev.attachments.is_empty() {
            return Reading::default();
        }
        self.router
            .deps
            .media
            .read(&ev.attachments)
            .instrument(
                tracing::info_span!(parent: span, "media.read", files = ev.attachments.len()),
            )
            .await
    }

    /// The images of `history` still in view (none for a model that cannot see).
    pub(super) async fn history_images(&self, history: &[StoredMessage]) -> HistoryImages {
        self.router.deps.media.history_images(history).await
    }

    /// Answers a message whose files could not be read, and records both sides in one
    /// lease-checked commit.
    pub(super) async fn unreadable(
        &self,
        lease: &Lease,
        row: &InboxRow,
        ev: &MessageEvent,
        (reading, agent): (Reading, &crate::agent::roster::Agent),
    ) -> Result<(), Failure> {
        self.forget();
        let store = &self.router.deps.store;
        let session = self.session(lease, ev, agent).await?;
        let reply = reading.direct_answer();
        let attempt = InboxAttempt {
            id: row.id,
            attempt: row.attempts + 1,
        };
        let turn_id = store.turn_begin(lease, &session.id, Some(attempt)).await?;
        let mut commit = TurnCommit::new(turn_id, &session.id, Some(row.id), InboxStatus::Done);
        let mut user = NewMessage::new(Role::User, reading.compose(&ev.text));
        user.media = reading.attachments;
        commit.messages = vec![user, NewMessage::new(Role::Assistant, reply.clone())];
        commit.outbox = self.outbox_rows(row, &reply, "media");
        commit.note = Some("attachments could not be read".into());
        store.turn_commit(lease, &commit).await?;
        self.router.deps.outbox_wake.notify_one();
        metrics::counter!("herald_media_unread_total", "platform" => ev.platform.to_string())
            .increment(1);
        Ok(())
    }
}
