//! The durable record of a turn's preview messages: the platform message ids of the live
//! preview of the reply to one inbox event, in chunk order, kept in the store's `kv` table.
//!
//! Written by the lane's preview as soon as each preview message is sent, read by the outbox
//! sender, which delivers chunk `i` of that turn's reply by editing preview message `i` into
//! it instead of sending a second copy, and by a retried turn, which edits the same messages
//! instead of sending new ones. Display state only: nothing here is a transcript.

use crate::domain::LaneKey;
use crate::store::{OutboxKey, ReplyKey, Store, StoreResult};

fn key(lane: &str, inbox_id: i64) -> String {
    format!("preview:{lane}:{inbox_id}")
}

/// The preview message ids of the reply to `inbox_id` in `lane` (empty when none).
pub async fn load(store: &dyn Store, lane: &LaneKey, inbox_id: i64) -> StoreResult<Vec<String>> {
    let raw = store.kv_get(&key(lane.as_str(), inbox_id)).await?;
    Ok(raw
        .and_then(|r| serde_json::from_str(&r).ok())
        .unwrap_or_default())
}

pub async fn save(
    store: &dyn Store,
    lane: &LaneKey,
    inbox_id: i64,
    ids: &[String],
) -> StoreResult<()> {
    let value = serde_json::to_string(ids).expect("ids serialize");
    store.kv_set(&key(lane.as_str(), inbox_id), &value).await
}

pub async fn forget(store: &dyn Store, lane: &LaneKey, inbox_id: i64) -> StoreResult<()> {
    store.kv_delete(&key(lane.as_str(), inbox_id)).await
}

/// Whether `idem_key` is chunk `chunk` of the turn reply to inbox row `inbox_id` (built from
/// the same typed key as the lane worker's `outbox_rows`); only such rows finalize previews.
pub fn is_turn_chunk(idem_key: &str, lane: &LaneKey, inbox_id: i64, chunk: i64) -> bool {
    let key = OutboxKey::chunk(ReplyKey::answer(lane, inbox_id, "turn"), chunk as usize);
    idem_key == key.idem_key()
}
