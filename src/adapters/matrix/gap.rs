//! A joined room's timeline that the homeserver cut (`limited: true` in a `/sync` batch) has a
//! gap: events between the last stored sync position and the first event of the batch that the
//! batch does not carry. After a restart with many messages waiting, or a busy room, those are
//! people's messages; dropping them would break Herald's promise that nothing sent is lost.
//!
//! This file fetches the gap with `/rooms/{room}/messages`, backwards from the timeline's
//! `prev_batch` down to the stored sync token (`to`), page by page, and hands the events back
//! in timeline order so the sync loop ingests them before the batch's own events and before
//! the new token is stored. The inbox dedupes on the event id, so an overlap with what was
//! already taken is harmless. Events from before the bot joined are cut by the caller, as for
//! any batch.
//!
//! Must not: return a partial gap as if it were whole (an error makes the batch come again), or
//! log what people wrote.

use matrix_sdk::deserialized_responses::TimelineEvent;
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::{RoomId, UInt};
use matrix_sdk::Client;

/// Events asked for in one `/messages` page.
const PAGE: u32 = 100;
/// Pages fetched for one gap at most: past this many events (a room that said thousands of
/// things while the bot was away) the oldest are given up, with a warning naming the room.
const MAX_PAGES: usize = 50;

/// Why a gap could not be fetched; the batch is then taken again from the old token.
#[derive(Debug, thiserror::Error)]
pub enum GapError {
    #[error("the bot does not know room {0}")]
    UnknownRoom(String),
    #[error("fetching the missed events of room {room}: {source}")]
    Fetch {
        room: String,
        #[source]
        source: Box<matrix_sdk::Error>,
    },
}

/// The events of `room_id` after the stored sync position `since` and before the cut
/// timeline's `prev_batch`, oldest first.
pub async fn missed(
    client: &Client,
    room_id: &RoomId,
    prev_batch: &str,
    since: &str,
) -> Result<Vec<TimelineEvent>, GapError> {
    let room = client
        .get_room(room_id)
        .ok_or_else(|| GapError::UnknownRoom(room_id.to_string()))?;
    let mut newest_first: Vec<TimelineEvent> = Vec::new();
    let mut from = prev_batch.to_string();
    for _ in 0..MAX_PAGES {
        let mut options = MessagesOptions::backward().from(from.as_str());
        options.to = Some(since.to_string());
        options.limit = UInt::from(PAGE);
        let page = room.messages(options).await.map_err(|e| GapError::Fetch {
            room: room_id.to_string(),
            source: Box::new(e),
        })?;
        let empty = page.chunk.is_empty();
        newest_first.extend(page.chunk);
        match page.end {
            Some(end) if !empty && end != from => from = end,
            _ => {
                metrics::counter!("herald_matrix_gap_events_total")
                    .increment(newest_first.len() as u64);
                newest_first.reverse();
                return Ok(newest_first);
            }
        }
    }
    tracing::warn!(room = %room_id, events = newest_first.len(),
        "matrix: a room's gap is longer than Herald fetches; its oldest missed events are not read");
    metrics::counter!("herald_matrix_gap_events_total").increment(newest_first.len() as u64);
    newest_first.reverse();
    Ok(newest_first)
}
