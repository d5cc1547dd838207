//! One raw update in, at most one inbox row out — the step the poller and the webhook share.
//!
//! Updates are parsed one by one from raw JSON, so a single update teloxide cannot read is
//! logged and skipped instead of failing the whole `getUpdates` batch.
//!
//! Must not: acknowledge anything to Telegram (the callers do, after this returns `Ok`).

use std::collections::HashSet;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use teloxide::types::{Update, UpdateKind};

use super::inbound::{decide, BotIdentity, Decision, Rules};
use crate::lanes::LaneRouter;
use crate::store::{InboxInsert, StoreError};

pub struct Receiver {
    pub router: Arc<LaneRouter>,
    pub me: BotIdentity,
    pub free_response_chats: HashSet<String>,
}

/// What became of one update (for logs and tests; every variant may be acknowledged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Ingested,
    Duplicate,
    Ignored,
    Malformed,
}

impl Receiver {
    /// `Err` only when the store could not take the event: the caller must not acknowledge.
    pub async fn handle(&self, raw: &Value) -> Result<Received, StoreError> {
        let update_id = raw.get("update_id").and_then(Value::as_i64);
        // From `&Value`, not an owned one: teloxide's `UpdateKind` reads borrowed keys.
        let update = match Update::deserialize(raw) {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(update_id, error = %e, "skipping a Telegram update that cannot be read");
                metrics::counter!("herald_telegram_updates_total", "outcome" => "malformed")
                    .increment(1);
                return Ok(Received::Malformed);
            }
        };
        if let UpdateKind::Error(_) = &update.kind {
            tracing::warn!(
                update_id,
                "skipping a Telegram update of an unknown or malformed kind"
            );
            metrics::counter!("herald_telegram_updates_total", "outcome" => "malformed")
                .increment(1);
            return Ok(Received::Malformed);
        }
        let rules = Rules {
            me: &self.me,
            free_response_chats: &self.free_response_chats,
        };
        match decide(&update, &rules) {
            Decision::Ignore(reason) => {
                tracing::debug!(update_id, reason, "telegram update not for the agent");
                metrics::counter!("herald_telegram_updates_total", "outcome" => "ignored")
                    .increment(1);
                Ok(Received::Ignored)
            }
            Decision::Ingest(ev) => {
                let res = self.router.ingest(&ev).await?;
                metrics::counter!("herald_telegram_updates_total", "outcome" => "ingested")
                    .increment(1);
                Ok(match res {
                    InboxInsert::Inserted(_) => Received::Ingested,
                    InboxInsert::Duplicate(_) => Received::Duplicate,
                })
            }
        }
    }
}
