//! One raw update in, at most one inbox row out — the step the poller and the webhook share.
//!
//! Updates are parsed one by one from raw JSON, so a single update teloxide cannot read is
//! logged and skipped instead of failing the whole `getUpdates` batch; one whose decode panics
//! is skipped the same way (logged at error), so no single update can stop intake.
//!
//! Must not: acknowledge anything to Telegram (the callers do, after this returns `Ok`).

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;

use serde::Deserialize;
use serde_json::Value;
use teloxide::payloads::AnswerCallbackQuerySetters;
use teloxide::requests::Requester;
use teloxide::types::{CallbackQueryId, Update, UpdateKind};
use teloxide::Bot;

use super::inbound::{decide, BotIdentity, Decision, Rules};
use crate::lanes::{Approvals, Ingest};
use crate::store::{InboxInsert, StoreError};

pub struct Receiver {
    pub ingest: Ingest,
    pub approvals: Approvals,
    /// Answers button presses (`answerCallbackQuery`).
    pub bot: Bot,
    pub token: String,
    pub me: BotIdentity,
    pub free_response_chats: HashSet<String>,
}

/// What became of one update (for logs and tests; every variant may be acknowledged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    Ingested,
    Duplicate,
    /// An approval button press, answered.
    Pressed,
    Ignored,
    Malformed,
}

impl Receiver {
    /// `Err` only when the store could not take the event: the caller must not acknowledge.
    pub async fn handle(&self, raw: &Value) -> Result<Received, StoreError> {
        let update_id = raw.get("update_id").and_then(Value::as_i64);
        let rules = Rules {
            me: &self.me,
            free_response_chats: &self.free_response_chats,
        };
        let Some(Some(decision)) = contain_panic(update_id, || decode(raw, update_id, &rules))
        else {
            return Ok(Received::Malformed);
        };
        match decision {
            Decision::Ignore(reason) => {
                tracing::debug!(update_id, reason, "telegram update not for the agent");
                metrics::counter!("herald_telegram_updates_total", "outcome" => "ignored")
                    .increment(1);
                Ok(Received::Ignored)
            }
            Decision::Press { press, query_id } => {
                // Recorded in the store before the update is acknowledged; the toast is best
                // effort (a press answered here and lost there is still answered).
                let outcome = self.approvals.press(&press).await;
                let answer = self
                    .bot
                    .answer_callback_query(CallbackQueryId(query_id))
                    .text(outcome.text());
                if let Err(e) = answer.await {
                    tracing::debug!(error = %super::redact(&e, &self.token), "answerCallbackQuery failed");
                }
                metrics::counter!("herald_telegram_updates_total", "outcome" => "pressed")
                    .increment(1);
                Ok(Received::Pressed)
            }
            Decision::Ingest(ev) => {
                let res = self.ingest.ingest(&ev).await?;
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

/// Update JSON → decision, with no I/O; `None` (logged and counted) when teloxide cannot read
/// the update or reads it as an unknown kind.
fn decode(raw: &Value, update_id: Option<i64>, rules: &Rules<'_>) -> Option<Decision> {
    // From `&Value`, not an owned one: teloxide's `UpdateKind` reads borrowed keys.
    let update = match Update::deserialize(raw) {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!(update_id, error = %e, "skipping a Telegram update that cannot be read");
            count_malformed();
            return None;
        }
    };
    if let UpdateKind::Error(_) = &update.kind {
        tracing::warn!(
            update_id,
            "skipping a Telegram update of an unknown or malformed kind"
        );
        count_malformed();
        return None;
    }
    Some(decide(&update, rules))
}

/// Runs the decode of one update; a panic in it (a bug of ours or teloxide's on some input)
/// costs that update only. Uncaught, it would end the poller task with the offset not advanced
/// — every successor re-reads the same update and dies too — or drop the webhook connection,
/// which Telegram redelivers until it gives up. `None` after a panic, logged at error with the
/// update id and counted as malformed; the caller then acknowledges the update as skipped.
pub(super) fn contain_panic<T>(update_id: Option<i64>, decode: impl FnOnce() -> T) -> Option<T> {
    // Unwind safety: `decode` only reads its inputs, so a panic leaves nothing half-changed.
    match std::panic::catch_unwind(AssertUnwindSafe(decode)) {
        Ok(v) => Some(v),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            tracing::error!(
                update_id,
                panic = message,
                "decoding a Telegram update panicked; skipped it (a bug: keep this log line)"
            );
            count_malformed();
            None
        }
    }
}

fn count_malformed() {
    metrics::counter!("herald_telegram_updates_total", "outcome" => "malformed").increment(1);
}

#[cfg(test)]
#[path = "receive_tests.rs"]
mod tests;
