//! Media the agent cannot read yet (a voice note, a photo without caption, a sticker, a file):
//! the person gets a short answer naming what arrived and what Herald can read, and both sides
//! are recorded in the transcript under the lane's lease — nothing is dropped in silence.
//!
//! The recorded user row is Herald's description of the message, not words the person wrote,
//! so it carries no platform message id: it never passes for the session's first request (a
//! pending handoff capsule waits for the first message the model answers). Must not: call the
//! model or download anything.

use super::worker::{Failure, Worker};
use crate::domain::{describe_all, Attachment, MessageEvent, Role};
use crate::store::{InboxAttempt, InboxRow, InboxStatus, Lease, NewMessage, TurnCommit};

/// The answer to a media-only message.
pub fn reply_text(attachments: &[Attachment]) -> String {
    format!(
        "I received {} but I can only read text for now, so I could not open it. Please type \
         what you want me to know, or add it as a caption.",
        describe_all(attachments)
    )
}

impl Worker {
    /// Answers a media-only message and records both sides, in one lease-checked commit.
    pub(super) async fn media(
        &self,
        lease: &Lease,
        row: &InboxRow,
        ev: &MessageEvent,
    ) -> Result<(), Failure> {
        let store = &self.router.deps.store;
        let session = self.session(lease, ev).await?;
        let reply = reply_text(&ev.attachments);
        let attempt = InboxAttempt {
            id: row.id,
            attempt: row.attempts + 1,
        };
        let turn_id = store.turn_begin(lease, &session.id, Some(attempt)).await?;
        let mut commit = TurnCommit::new(turn_id, &session.id, Some(row.id), InboxStatus::Done);
        commit.messages = vec![
            NewMessage::new(
                Role::User,
                format!(
                    "[{} received; not readable yet]",
                    describe_all(&ev.attachments)
                ),
            ),
            NewMessage::new(Role::Assistant, reply.clone()),
        ];
        commit.outbox = self.outbox_rows(row, &reply, "media");
        commit.note = Some("media not readable yet".into());
        store.turn_commit(lease, &commit).await?;
        self.router.deps.outbox_wake.notify_one();
        metrics::counter!("herald_media_unread_total", "platform" => ev.platform.as_str())
            .increment(1);
        Ok(())
    }
}
