//! Who spoke in a session: the senders of the messages a session answered, read from the
//! inbox rows its turns closed. A group member's `/new` resets the shared session only when
//! every message in it was theirs.
//!
//! A supertrait of [`super::Store`]; ordinary generic code over [`super::Pools`].

use async_trait::async_trait;

use super::common::{InboxRaw, INBOX_COLS};
use super::{db, Pools, StoreResult};
use crate::domain::{LaneKey, SessionId};

#[async_trait]
pub trait SpeakerStore: Send + Sync {
    /// The distinct senders of the person messages `session` of `lane` answered (internal
    /// events left out), from its first `limit` rows.
    async fn session_speakers(
        &self,
        lane: &LaneKey,
        session: &SessionId,
        limit: i64,
    ) -> StoreResult<Vec<String>>;
}

#[async_trait]
impl<S: Pools> SpeakerStore for S {
    async fn session_speakers(
        &self,
        lane: &LaneKey,
        session: &SessionId,
        limit: i64,
    ) -> StoreResult<Vec<String>> {
        let sql = format!(
            "SELECT {INBOX_COLS} FROM inbox WHERE lane = $1 AND session_id = $2 \
             ORDER BY id LIMIT CAST($3 AS BIGINT)"
        );
        let rows: Vec<InboxRaw> = db::query(sqlx::AssertSqlSafe(sql))
            .bind(lane.as_str())
            .bind(session)
            .bind(limit)
            .fetch_all(self.reader())
            .await?;
        let mut out = Vec::new();
        for row in rows {
            let row = row.typed()?;
            if !row.event.is_internal() && !out.contains(&row.event.sender_id) {
                out.push(row.event.sender_id);
            }
        }
        Ok(out)
    }
}
