//! One decided Matrix event in, at most one inbox row out (or a press, or a reply): the I/O
//! half of `inbound.rs`, and the invite rule.
//!
//! A text or a reaction is first offered to the approvals (`Approvals::answer_in_words`): an
//! answer to an open question is a press, the person is told its outcome, and it never reaches
//! the agent. A file is fetched (and decrypted, for an encrypted room) through the SDK before
//! the inbox write, capped by `media.max_bytes`, and handed in from the media cache. An event
//! the bot cannot decrypt gets a reply asking to verify the bot's device or resend. Invites are
//! accepted only from allowed users; anyone else's is declined (and, with
//! `matrix.encryption = false`, an invite to an encrypted room).
//!
//! The replies this file sends carry a transaction id derived from the event they answer, so
//! a batch taken again after a crash does not say them twice.
//!
//! Must not: log what people wrote, or join a room a stranger invited the bot to.

use std::collections::HashSet;
use std::sync::Arc;

use matrix_sdk::media::{MediaFormat, MediaRequestParameters};
use matrix_sdk::ruma::api::client::membership::join_room_by_id;
use matrix_sdk::ruma::events::room::{EncryptedFile, MediaSource};
use matrix_sdk::ruma::{OwnedMxcUri, OwnedUserId, RoomId};
use matrix_sdk::Client;
use serde_json::Value;

use super::inbound::{self, Decision, Rules, Words};
use super::outbound::{classify, notice};
use super::MATRIX;
use crate::adapters::Edge;
use crate::delivery::SendError;
use crate::domain::{Attachment, MediaSource as Source, MessageEvent};
use crate::lanes::WordReply;
use crate::media::cache::MediaCache;
use crate::store::{InboxInsert, StoreError};

/// Told to the sender of an event the bot could not decrypt.
pub const UNDECRYPTABLE: &str = "I could not decrypt your message: my device has no key for it. Please verify my device (or share room keys with it) and send it again.";

pub struct Receiver {
    pub edge: Edge,
    pub client: Client,
    pub me: String,
    pub require_mention: bool,
    pub free_response_rooms: HashSet<String>,
    /// `matrix.encryption`: when off, invites to encrypted rooms are declined.
    pub encryption: bool,
    pub cache: Arc<MediaCache>,
}

impl Receiver {
    pub fn me(&self) -> &str {
        &self.me
    }

    pub fn rules(&self) -> Rules<'_> {
        Rules {
            me: &self.me,
            require_mention: self.require_mention,
            free_response_rooms: &self.free_response_rooms,
        }
    }

    /// Acts on one decision; `Err` only when the store could not take the event (the batch is
    /// then fetched again).
    pub async fn handle(&self, decision: Decision) -> Result<(), StoreError> {
        let outcome = match decision {
            Decision::Ignore(reason) => {
                tracing::debug!(reason, "matrix event not for the agent");
                "ignored"
            }
            Decision::React(words) => {
                self.answer(&words).await;
                "reaction"
            }
            Decision::Undecryptable {
                room_id,
                thread_id,
                sender_id,
                event_id,
            } => {
                tracing::warn!(room = %room_id, sender = %sender_id,
                    "matrix: an event could not be decrypted; asking the sender to verify or resend");
                self.reply(&room_id, thread_id.as_deref(), &event_id, UNDECRYPTABLE)
                    .await;
                "undecryptable"
            }
            Decision::Ingest {
                mut event,
                words,
                media,
            } => {
                if self.answer(&words).await {
                    "answer"
                } else {
                    if let Some(content) = media {
                        self.attach(&mut event, &content).await;
                    }
                    match self.edge.ingest.ingest(&event).await? {
                        InboxInsert::Inserted(_) => "ingested",
                        InboxInsert::Duplicate(_) => "duplicate",
                    }
                }
            }
        };
        metrics::counter!("herald_matrix_events_total", "outcome" => outcome).increment(1);
        Ok(())
    }

    /// Offers a text or a reaction to the approvals; `true` when it answered a question (the
    /// person has been told the outcome).
    async fn answer(&self, words: &Words) -> bool {
        let reply = WordReply {
            platform: MATRIX,
            chat_id: &words.room_id,
            thread_id: words.thread_id.as_deref(),
            sender_id: &words.sender_id,
            text: &words.text,
            in_reply_to: words.in_reply_to.as_deref(),
        };
        let Some(outcome) = self.edge.approvals.answer_in_words(&reply).await else {
            return false;
        };
        let key = format!(
            "{}:{}:{}",
            words.sender_id,
            words.in_reply_to.as_deref().unwrap_or(""),
            words.text
        );
        self.reply(
            &words.room_id,
            words.thread_id.as_deref(),
            &key,
            &outcome.text(),
        )
        .await;
        true
    }

    /// A notice in the room (and thread), once per `key`.
    async fn reply(&self, room_id: &str, thread: Option<&str>, key: &str, text: &str) {
        let Some(room) = RoomId::parse(room_id)
            .ok()
            .and_then(|id| self.client.get_room(&id))
        else {
            return;
        };
        if let Err(e) = notice(&room, thread, &format!("reply:{key}"), text).await {
            tracing::debug!(error = %e, "matrix: could not tell the person");
        }
    }

    /// Fetches (and decrypts) the event's file into the media cache and attaches it; a file
    /// over `media.max_bytes` or one that cannot be fetched becomes a note in the text.
    async fn attach(&self, event: &mut MessageEvent, content: &Value) {
        let Some((kind, name, mime, size)) = inbound::announced(content) else {
            return;
        };
        let max = self.edge.config.media.max_bytes;
        let fetched = match (size, source(content)) {
            (Some(n), _) if n > max => Err(format!("over the {max}-byte limit")),
            (_, None) => Err("no file in the message".to_string()),
            (_, Some(src)) => self.download(src, max).await,
        };
        match fetched {
            Ok(sha) => {
                let mut a = Attachment::new(kind, Source::Cached(sha));
                a.name = Some(name);
                a.mime = mime;
                a.size = size;
                event.attachments.push(a);
            }
            Err(why) => {
                tracing::warn!(reason = %why, "matrix: a file could not be taken");
                let note = format!("[file {name} could not be read: {why}]");
                event.text = if event.text.is_empty() {
                    note
                } else {
                    format!("{}\n{note}", event.text)
                };
            }
        }
    }

    async fn download(&self, src: MediaSource, max: u64) -> Result<String, String> {
        let request = MediaRequestParameters {
            source: src,
            format: MediaFormat::File,
        };
        let bytes = self
            .client
            .media()
            .get_media_content(&request, false)
            .await
            .map_err(|e| format!("the homeserver did not give it: {e}"))?;
        if bytes.len() as u64 > max {
            return Err(format!("over the {max}-byte limit"));
        }
        self.cache
            .put(&bytes)
            .await
            .map_err(|e| format!("the media cache refused it: {e}"))
    }

    /// Joins a room an allowed user invited the bot to; declines anyone else's invite. Who
    /// invited and whether the room is encrypted are read from the invite's own stripped state
    /// (`invite_state`), not asked of the homeserver: the bot may not read a room it has not
    /// joined. `Err` when the homeserver could not be reached (the batch then comes again, the
    /// invite with it); an invite that cannot be answered for good is logged and left.
    pub async fn invited(&self, room_id: &RoomId, invite_state: &[Value]) -> Result<(), SendError> {
        let Some(invite) = inbound::invite(invite_state, &self.me) else {
            tracing::warn!(room = %room_id, "matrix: an invite without its member event; left unanswered");
            return Ok(());
        };
        let access =
            (crate::config::registry::spec(MATRIX).map(|s| s.access)).map(|f| f(&self.edge.config));
        let allowed = access.is_some_and(|a| a.all || a.users.contains(&invite.inviter));
        let join = allowed && (self.encryption || !invite.encrypted);
        let res = if join {
            tracing::info!(room = %room_id, inviter = %invite.inviter, "matrix: joining on an allowed user's invite");
            self.join(room_id, &invite).await
        } else {
            if allowed {
                tracing::info!(room = %room_id, "matrix: declining an encrypted room (matrix.encryption = false)");
            } else {
                tracing::info!(room = %room_id, inviter = %invite.inviter, "matrix: declining a stranger's invite");
            }
            match self.client.get_room(room_id) {
                Some(room) => room.leave().await,
                None => Ok(()),
            }
        };
        match res.map_err(|e| classify(&e)) {
            Ok(()) => Ok(()),
            Err(SendError::Permanent(why)) => {
                tracing::warn!(room = %room_id, error = %why, "matrix: an invite could not be answered (withdrawn?)");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

impl Receiver {
    /// Joins; a direct chat is first marked one in the bot's `m.direct` (what makes the room
    /// answered without a mention), so a kill between the two never leaves a joined direct chat
    /// unmarked: the invite comes again until the join is done. The join is the bare request:
    /// the SDK's own join rewrites `m.direct` from its local copy, which within one batch of
    /// invites does not hold the rooms marked a moment before.
    async fn join(&self, room_id: &RoomId, invite: &inbound::Invite) -> matrix_sdk::Result<()> {
        if invite.direct {
            if let Ok(inviter) = OwnedUserId::try_from(invite.inviter.as_str()) {
                self.client
                    .account()
                    .mark_as_dm(room_id, &[inviter])
                    .await?;
            }
        }
        let request = join_room_by_id::v3::Request::new(room_id.to_owned());
        self.client.send(request).await?;
        Ok(())
    }
}

/// Where a media event's bytes are: `file` (encrypted, with its key) or `url` (plain mxc).
fn source(content: &Value) -> Option<MediaSource> {
    if let Some(file) = content.get("file") {
        let file: EncryptedFile = serde_json::from_value(file.clone()).ok()?;
        return Some(MediaSource::Encrypted(Box::new(file)));
    }
    let url = content.get("url").and_then(Value::as_str)?;
    Some(MediaSource::Plain(OwnedMxcUri::from(url)))
}
