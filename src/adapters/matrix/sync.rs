//! The `/sync` long-poll: one batch at a time, every event of it in the inbox before the
//! batch's `next_batch` is stored (`matrix:sync_token` in Herald's store), so a batch a crash
//! interrupted is fetched again from the old token and the inbox's event-id dedupe absorbs the
//! repeat (the SDK's own sync position is forgotten at start, `session.rs`, or it would drop
//! that repeat as already seen). A batch the store refused is taken again from memory. The first sync (no token yet) only learns the rooms: history from before the bot was
//! running is never answered. Neither is what a room said before the bot joined it. A room
//! whose timeline the homeserver cut (`limited`) has its gap fetched first (`gap.rs`), so a
//! restart after a busy while loses nothing.
//!
//! A homeserver that is down or refuses the sync is retried with backoff; nothing is lost, the
//! token stays where it was.
//!
//! Must not: store a token whose batch was not taken whole, or log message text.

use std::time::Duration;

use matrix_sdk::config::SyncSettings;
use matrix_sdk::deserialized_responses::{TimelineEvent, TimelineEventKind};
use matrix_sdk::ruma::api::client::filter::FilterDefinition;
use matrix_sdk::ruma::{OwnedRoomId, UInt};
use matrix_sdk::sync::SyncResponse;
use matrix_sdk::Client;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::gap::{self, GapError};
use super::inbound::{self, Place};
use super::receive::Receiver;
use crate::delivery::SendError;
use crate::store::StoreError;
use crate::tasks::Backoff;

/// Where the sync token is kept in the store.
pub const TOKEN_KEY: &str = "matrix:sync_token";
/// How long one `/sync` waits on the homeserver for news.
const POLL: Duration = Duration::from_secs(30);
/// Events per room in one batch before the homeserver cuts the timeline (`limited`).
const TIMELINE_LIMIT: u32 = 200;

pub struct Syncer {
    pub client: Client,
    pub receiver: Receiver,
}

impl Syncer {
    pub async fn run(self, cancel: CancellationToken) {
        let store = self.receiver.edge.store.clone();
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(60));
        let mut token = loop {
            match store.kv_get(TOKEN_KEY).await {
                Ok(t) => break t,
                Err(e) => {
                    tracing::warn!(error = %e, "matrix: cannot read the sync token; retrying")
                }
            }
            if backoff.wait(&cancel).await.is_err() {
                return;
            }
        };
        let mut filter = FilterDefinition::with_lazy_loading();
        filter.room.timeline.limit = Some(UInt::from(TIMELINE_LIMIT));
        loop {
            let mut settings = SyncSettings::default()
                .timeout(POLL)
                .filter(filter.clone().into());
            settings = match &token {
                Some(t) => settings.token(t.clone()),
                None => settings.token(matrix_sdk::config::SyncToken::NoToken),
            };
            let res = tokio::select! {
                _ = cancel.cancelled() => return,
                res = self.client.sync_once(settings) => res,
            };
            let batch = match res {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(error = %e, "matrix sync failed; retrying with backoff");
                    metrics::counter!("herald_matrix_sync_errors_total").increment(1);
                    if backoff.wait(&cancel).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            let next = batch.next_batch.clone();
            // A batch not taken whole is taken again from memory, not fetched again: the SDK
            // returns an empty batch for a `next_batch` it has already seen.
            while let Err(e) = self.take(&batch, token.as_deref()).await {
                tracing::warn!(error = %e, "matrix: a batch was not taken whole; it is taken again");
                if backoff.wait(&cancel).await.is_err() {
                    return;
                }
            }
            while let Err(e) = store.kv_set(TOKEN_KEY, &next).await {
                tracing::warn!(error = %e, "matrix: cannot store the sync token; trying again");
                if backoff.wait(&cancel).await.is_err() {
                    return;
                }
            }
            token = Some(next);
            backoff.reset();
        }
    }

    /// Takes one batch fetched from `since` (`None`: the first sync): invites, then every
    /// joined room's new events in order, a cut timeline's gap first.
    async fn take(&self, batch: &SyncResponse, since: Option<&str>) -> Result<(), Refused> {
        for (room_id, invite) in &batch.rooms.invited {
            let state: Vec<Value> = (invite.invite_state.events.iter())
                .filter_map(|e| e.deserialize_as::<Value>().ok())
                .collect();
            self.receiver.invited(room_id, &state).await?;
        }
        for room_id in batch.rooms.left.keys() {
            tracing::info!(room = %room_id, "matrix: the bot left or was removed from a room");
        }
        let Some(since) = since else {
            return Ok(());
        };
        for (room_id, update) in &batch.rooms.joined {
            let timeline = &update.timeline;
            let mut events = Vec::new();
            if let (true, Some(prev)) = (timeline.limited, &timeline.prev_batch) {
                events = gap::missed(&self.client, room_id, prev, since).await?;
                tracing::info!(room = %room_id, missed = events.len(),
                    "matrix: the homeserver cut a room's timeline; its gap was fetched");
            }
            events.extend(timeline.events.iter().cloned());
            for event in since_our_join(&events, self.receiver.me()) {
                self.one(room_id, event).await?;
            }
        }
        Ok(())
    }

    async fn one(&self, room_id: &OwnedRoomId, event: &TimelineEvent) -> Result<(), StoreError> {
        let unreadable = matches!(event.kind, TimelineEventKind::UnableToDecrypt { .. });
        let Ok(json) = event.raw().deserialize_as::<Value>() else {
            tracing::warn!(room = %room_id, "matrix: skipping an event that does not read");
            return Ok(());
        };
        // A direct chat as the spec has it (`m.direct`, set when the bot joined on a direct
        // invite): a room that merely has two members is still a room.
        let direct = match self.client.get_room(room_id) {
            Some(room) => room.is_direct().await.unwrap_or(false),
            None => false,
        };
        let place = Place {
            room_id: room_id.as_str(),
            direct,
        };
        let decision = inbound::decide(&json, place, &self.receiver.rules(), unreadable);
        self.receiver.handle(decision).await
    }
}

/// Why a batch was not taken whole (its token is then not stored, and it comes again).
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Gap(#[from] GapError),
    #[error("answering an invite: {0}")]
    Invite(#[from] SendError),
}

/// The events after the bot's own join, when the batch holds it (what the room said before is
/// history the bot was not there for); all of them otherwise.
fn since_our_join<'a>(events: &'a [TimelineEvent], me: &str) -> &'a [TimelineEvent] {
    let joined_at = events.iter().rposition(|e| {
        let Ok(v) = e.raw().deserialize_as::<Value>() else {
            return false;
        };
        v.get("type").and_then(Value::as_str) == Some("m.room.member")
            && v.get("state_key").and_then(Value::as_str) == Some(me)
            && v.pointer("/content/membership").and_then(Value::as_str) == Some("join")
            && v.pointer("/unsigned/prev_content/membership")
                .and_then(Value::as_str)
                != Some("join")
    });
    match joined_at {
        Some(i) => &events[i + 1..],
        None => events,
    }
}
