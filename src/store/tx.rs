//! The transaction helpers every write path shares: the lease checks a write runs first
//! inside its transaction, and the inserts of messages, inbox events and outbox rows that
//! turns, skips and compactions reuse.
//!
//! Written once for both backends over [`Tx`] (`db.rs`); the concerns (`inbox.rs`,
//! `transcript.rs`, `turns.rs`, `outbox.rs`, `context.rs`) call these inside their transaction.
//! Nothing here commits: the caller owns the transaction. Outside text goes through
//! `text::clean` here, like in every other writer (`text.rs`).

use super::common;
use super::db::{self, Tx};
use super::text::{clean, clean_json, clean_opt};
use super::types::{Lease, NewMessage, NewOutbox};
use super::{StoreError, StoreResult};
use crate::domain::MessageEvent;

pub(super) async fn check_lease(tx: &mut Tx, lease: &Lease) -> StoreResult<()> {
    let res = db::query(common::LEASE_CHECK)
        .bind(&lease.name)
        .bind(&lease.holder)
        .bind(lease.token)
        .execute(&mut *tx)
        .await?;
    if res == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost {
            name: lease.name.clone(),
        })
    }
}

/// The lease check for a write into one session: the lease must be current *and* be
/// the lease of the session's lane (a lease name is the lane key), so holding one
/// lane's lease never lets a worker write into another lane's transcript.
pub(super) async fn check_session_write(
    tx: &mut Tx,
    lease: &Lease,
    session_id: &str,
) -> StoreResult<()> {
    // One statement on the hot path; the two reads below only name the failure.
    let res = db::query(common::LEASE_CHECK_SESSION)
        .bind(&lease.name)
        .bind(&lease.holder)
        .bind(lease.token)
        .bind(session_id)
        .execute(&mut *tx)
        .await?;
    if res == 1 {
        return Ok(());
    }
    check_lease(tx, lease).await?;
    let lane: Option<(String,)> = db::query("SELECT lane FROM sessions WHERE id = $1")
        .bind(session_id)
        .fetch_optional(&mut *tx)
        .await?;
    match lane {
        Some((lane,)) => Err(common::wrong_lane(session_id, &lane, lease)),
        None => Err(StoreError::NotFound(format!("session {session_id}"))),
    }
}

pub(super) async fn insert_message(
    tx: &mut Tx,
    now: i64,
    lane: &str,
    session_id: &str,
    turn_id: Option<i64>,
    m: &NewMessage,
) -> StoreResult<i64> {
    let (id,): (i64,) = db::query(
        "INSERT INTO messages (session_id, lane, turn_id, role, content, api_content, \
         tool_calls, tool_call_id, tool_name, platform_message_id, media, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id",
    )
    .bind(session_id)
    .bind(lane)
    .bind(turn_id)
    .bind(m.role.as_str())
    .bind(&*clean(&m.content))
    .bind(clean_opt(m.api_content.as_deref()))
    .bind(common::tool_calls_json(m).map(clean_json))
    .bind(clean_opt(m.tool_call_id.as_deref()))
    .bind(clean_opt(m.tool_name.as_deref()))
    .bind(&m.platform_message_id)
    .bind(common::media_json(m).map(clean_json))
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    Ok(id)
}

/// [`insert_message`] for each of `messages` in turn, outside any turn; the ids in order.
pub(super) async fn insert_each(
    tx: &mut Tx,
    now: i64,
    lane: &str,
    session_id: &str,
    messages: &[NewMessage],
) -> StoreResult<Vec<i64>> {
    let mut ids = Vec::with_capacity(messages.len());
    for m in messages {
        ids.push(insert_message(tx, now, lane, session_id, None, m).await?);
    }
    Ok(ids)
}

/// The columns [`insert_messages`] writes, per row.
const MESSAGE_COLS: usize = 12;
/// Rows per statement: far below SQLite's 32,766 bound variables.
const MESSAGE_ROWS: usize = 500;

/// [`insert_message`] for many rows, in one statement per [`MESSAGE_ROWS`] rows (one round
/// trip instead of one per row); the ids come back in the order of `messages`. A multi-row
/// `RETURNING` may list rows in any order, but both backends assign the ids of one statement's
/// rows in ascending order of its `VALUES`, so the sorted ids are the rows' ids in order.
pub(super) async fn insert_messages(
    tx: &mut Tx,
    now: i64,
    lane: &str,
    session_id: &str,
    turn_id: Option<i64>,
    messages: &[NewMessage],
) -> StoreResult<Vec<i64>> {
    let mut ids = Vec::with_capacity(messages.len());
    for batch in messages.chunks(MESSAGE_ROWS) {
        if let [m] = batch {
            ids.push(insert_message(tx, now, lane, session_id, turn_id, m).await?);
            continue;
        }
        let rows: Vec<String> = (0..batch.len())
            .map(|r| {
                let marks: Vec<String> = (1..=MESSAGE_COLS)
                    .map(|c| format!("${}", r * MESSAGE_COLS + c))
                    .collect();
                format!("({})", marks.join(", "))
            })
            .collect();
        let sql = format!(
            "INSERT INTO messages (session_id, lane, turn_id, role, content, api_content, \
             tool_calls, tool_call_id, tool_name, platform_message_id, media, created_at) \
             VALUES {} RETURNING id",
            rows.join(", ")
        );
        let mut q = db::query(sqlx::AssertSqlSafe(sql));
        for m in batch {
            q = q
                .bind(session_id)
                .bind(lane)
                .bind(turn_id)
                .bind(m.role.as_str())
                .bind(clean(&m.content))
                .bind(clean_opt(m.api_content.as_deref()))
                .bind(common::tool_calls_json(m).map(clean_json))
                .bind(clean_opt(m.tool_call_id.as_deref()))
                .bind(clean_opt(m.tool_name.as_deref()))
                .bind(&m.platform_message_id)
                .bind(common::media_json(m).map(clean_json))
                .bind(now);
        }
        let mut got: Vec<i64> = q
            .fetch_all::<(i64,)>(&mut *tx)
            .await?
            .into_iter()
            .map(|(id,)| id)
            .collect();
        if got.len() != batch.len() {
            return Err(StoreError::other(format!(
                "{} messages inserted, {} ids returned",
                batch.len(),
                got.len()
            )));
        }
        got.sort_unstable();
        ids.extend(got);
    }
    Ok(ids)
}

/// Takes live rows of a session out of the model's view: `compacted` 1 keeps them
/// searchable (compaction), 0 retracts them. Only content changes touch the search
/// index, so this costs no index work.
pub(super) async fn set_flags(
    tx: &mut Tx,
    session_id: &str,
    ids: &[i64],
    compacted: i64,
) -> StoreResult<()> {
    for id in ids {
        let res = db::query(
            "UPDATE messages SET active = 0, compacted = $1 \
             WHERE id = $2 AND session_id = $3 AND active = 1",
        )
        .bind(compacted)
        .bind(id)
        .bind(session_id)
        .execute(&mut *tx)
        .await?;
        if res != 1 {
            return Err(StoreError::NotFound(format!(
                "live message {id} in session {session_id}"
            )));
        }
    }
    Ok(())
}

/// Idempotent like the adapters' inbox writes: a known (platform, lane, message id) is left
/// as it is.
pub(super) async fn insert_inbox(tx: &mut Tx, now: i64, ev: &MessageEvent) -> StoreResult<()> {
    db::query(
        "INSERT INTO inbox (platform, platform_message_id, lane, event, received_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (platform, lane, platform_message_id) DO NOTHING",
    )
    .bind(ev.platform.as_str())
    .bind(&ev.platform_message_id)
    .bind(ev.lane().as_str())
    .bind(clean_json(serde_json::to_string(ev)?))
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Idempotent: a row whose key exists is left as it is (a re-run turn cannot add a
/// second copy of a chunk).
pub(super) async fn insert_outbox(tx: &mut Tx, now: i64, o: &NewOutbox) -> StoreResult<()> {
    db::query(
        "INSERT INTO outbox (idem_key, reply_key, lane, platform, chat_id, thread_id, reply_to, \
         inbox_id, chunk_index, text, created_at, media) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (idem_key) DO NOTHING",
    )
    .bind(o.key.idem_key())
    .bind(o.key.reply().map(|r| r.as_str().to_string()))
    .bind(o.lane.as_str())
    .bind(o.platform.as_str())
    .bind(&o.chat_id)
    .bind(&o.thread_id)
    .bind(&o.reply_to)
    .bind(o.inbox_id)
    .bind(o.chunk_index)
    .bind(&*clean(&o.text))
    .bind(now)
    .bind(
        o.media
            .as_ref()
            .and_then(|m| serde_json::to_string(m).ok())
            .map(clean_json),
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}
