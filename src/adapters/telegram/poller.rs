//! Long polling (`getUpdates`) as a singleton role, with the offset kept in the store.
//!
//! Only the replica holding the `role:telegram-poller` lease polls; the others wait and take
//! over when its lease expires. The offset (next update id) is stored under `telegram:offset`
//! and advances only after every update before it is in the inbox (or deliberately skipped),
//! so a crash re-reads at most a batch, which the inbox dedup absorbs. The role lease is short
//! and renewed every second (`store::ROLE_LEASE_TTL`, `ROLE_RENEW_EVERY`), and a standby
//! tries every second: a killed poller's role moves within `ROLE_TAKEOVER_BOUND`. A 409 conflict (another
//! poller on this token, or a webhook still set) is logged at warn every time and retried with
//! backoff: never a silent stall.
//!
//! Must not: drop pending updates (no `drop_pending_updates`, no negative offset), advance the
//! offset past an update the store refused, or poll without holding the lease.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use teloxide::requests::{JsonRequest, Payload, Requester};
use teloxide::{ApiError, Bot, RequestError};
use tokio_util::sync::CancellationToken;

use super::receive::Receiver;
use super::redact;
use crate::store::{Lease, Store, StoreError};
use crate::tasks::{sleep_or_cancel, Backoff};

pub const POLLER_LEASE: &str = "role:telegram-poller";
pub const OFFSET_KEY: &str = "telegram:offset";
const STANDBY_RETRY: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// `getUpdates` answered as raw JSON, so one unreadable update cannot fail the batch.
#[derive(Debug, Clone, Serialize)]
struct RawGetUpdates {
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<i64>,
    limit: u8,
    timeout: u32,
    allowed_updates: Vec<&'static str>,
}

impl Payload for RawGetUpdates {
    type Output = Vec<serde_json::Value>;
    const NAME: &'static str = "GetUpdates";

    fn timeout_hint(&self) -> Option<Duration> {
        Some(Duration::from_secs(self.timeout.into()))
    }
}

pub struct Poller {
    /// A client whose timeout exceeds the long-poll timeout.
    pub bot: Bot,
    pub token: String,
    pub receiver: Arc<Receiver>,
    pub store: Arc<dyn Store>,
    pub holder: String,
    pub timeout_secs: u32,
    /// Role lease time to live; a dead poller's successor waits at most this long.
    pub lease_ttl: Duration,
    /// Renewal interval, at most half of `lease_ttl`.
    pub renew_every: Duration,
}

impl Poller {
    pub async fn run(self, cancel: CancellationToken) {
        let mut standby_logged = false;
        loop {
            match self
                .store
                .lease_acquire(POLLER_LEASE, &self.holder, self.lease_ttl)
                .await
            {
                Ok(Some(lease)) => {
                    standby_logged = false;
                    tracing::info!(holder = %self.holder, "this replica now polls Telegram");
                    self.hold(lease, &cancel).await;
                }
                Ok(None) if !standby_logged => {
                    standby_logged = true;
                    tracing::info!("another replica polls Telegram; standing by to take over");
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot take the Telegram poller lease; retrying")
                }
            }
            if sleep_or_cancel(STANDBY_RETRY.min(self.renew_every), &cancel)
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// Polls while the lease holds; returns on shutdown or when the lease is lost.
    async fn hold(&self, lease: Lease, cancel: &CancellationToken) {
        let stop = cancel.child_token();
        let renew = async {
            loop {
                if sleep_or_cancel(self.renew_every, &stop).await.is_err() {
                    return false;
                }
                match self.store.lease_renew(&lease, self.lease_ttl).await {
                    Ok(()) => {}
                    Err(StoreError::LeaseLost { .. }) => {
                        tracing::warn!("lost the Telegram poller lease; stopping polling here");
                        stop.cancel();
                        return true;
                    }
                    Err(e) => tracing::warn!(error = %e, "poller lease renewal failed; retrying"),
                }
            }
        };
        let poll = async {
            self.poll(&stop).await;
            stop.cancel();
        };
        let (lost, ()) = tokio::join!(renew, poll);
        if !lost {
            if let Err(e) = self.store.lease_release(&lease).await {
                tracing::warn!(error = %e, "poller lease release failed; it will expire");
            }
        }
    }

    async fn poll(&self, stop: &CancellationToken) {
        // A webhook left set makes getUpdates fail with 409; pending updates are kept.
        let mut backoff = Backoff::new(Duration::from_secs(1), MAX_BACKOFF);
        loop {
            match self.bot.delete_webhook().await {
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %redact(&e, &self.token), "deleteWebhook failed; retrying")
                }
            }
            if backoff.wait(stop).await.is_err() {
                return;
            }
        }
        let Some(mut offset) = self.load_offset(stop).await else {
            return;
        };
        let mut backoff = Backoff::new(Duration::from_secs(1), MAX_BACKOFF);
        loop {
            let req = JsonRequest::new(
                self.bot.clone(),
                RawGetUpdates {
                    offset,
                    limit: 100,
                    timeout: self.timeout_secs,
                    allowed_updates: vec!["message", "edited_message", "callback_query"],
                },
            );
            let res = tokio::select! {
                r = req => r,
                _ = stop.cancelled() => return,
            };
            let err = match res {
                Ok(updates) => {
                    backoff.reset();
                    match self.take_batch(updates, offset, stop).await {
                        Some(next) => {
                            offset = next;
                            continue;
                        }
                        None => return,
                    }
                }
                Err(e) => e,
            };
            let delay = backoff.next_delay();
            let wait = match err {
                RequestError::Api(ApiError::TerminatedByOtherGetUpdates) => {
                    metrics::counter!("herald_telegram_poll_conflicts_total").increment(1);
                    tracing::warn!(retry_in_ms = delay.as_millis() as u64,
                        "Telegram getUpdates conflict (409): another process is polling with this bot token; retrying");
                    delay
                }
                RequestError::Api(ApiError::CantGetUpdates) => {
                    metrics::counter!("herald_telegram_poll_conflicts_total").increment(1);
                    tracing::warn!("Telegram getUpdates conflict (409): a webhook is set; deleting it (pending updates kept)");
                    if let Err(e) = self.bot.delete_webhook().await {
                        tracing::warn!(error = %redact(&e, &self.token), "deleteWebhook failed");
                    }
                    delay
                }
                RequestError::Api(ApiError::InvalidToken) => {
                    tracing::error!("Telegram rejected the bot token; check telegram.token");
                    MAX_BACKOFF
                }
                RequestError::RetryAfter(s) => s.duration(),
                e => {
                    tracing::warn!(error = %redact(&e, &self.token), retry_in_ms = delay.as_millis() as u64,
                        "Telegram getUpdates failed; retrying");
                    delay
                }
            };
            if sleep_or_cancel(wait, stop).await.is_err() {
                return;
            }
        }
    }

    /// Puts each update in the inbox, in order, then stores the new offset. Returns the offset
    /// for the next poll, or `None` on shutdown (after storing whatever progress was made).
    async fn take_batch(
        &self,
        updates: Vec<serde_json::Value>,
        offset: Option<i64>,
        stop: &CancellationToken,
    ) -> Option<Option<i64>> {
        let mut next = offset;
        let mut interrupted = false;
        'updates: for raw in &updates {
            let mut backoff = store_retry();
            loop {
                match self.receiver.handle(raw).await {
                    Ok(_) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot store a Telegram update; retrying (offset not advanced)");
                        if backoff.wait(stop).await.is_err() {
                            interrupted = true;
                            break 'updates;
                        }
                    }
                }
            }
            if let Some(id) = raw.get("update_id").and_then(serde_json::Value::as_i64) {
                next = Some(next.map_or(id + 1, |n| n.max(id + 1)));
            }
        }
        if next != offset && !self.store_offset(next, stop).await {
            return None;
        }
        if interrupted {
            None
        } else {
            Some(next)
        }
    }

    async fn load_offset(&self, stop: &CancellationToken) -> Option<Option<i64>> {
        let mut backoff = store_retry();
        loop {
            match self.store.kv_get(OFFSET_KEY).await {
                Ok(v) => return Some(v.and_then(|s| s.parse().ok())),
                Err(e) => tracing::warn!(error = %e, "cannot read the Telegram offset; retrying"),
            }
            backoff.wait(stop).await.ok()?;
        }
    }

    /// Returns false when shutdown came first; the updates stay in the inbox either way, and
    /// the next start re-reads them (deduplicated).
    async fn store_offset(&self, next: Option<i64>, stop: &CancellationToken) -> bool {
        let Some(next) = next else { return true };
        let mut backoff = store_retry();
        loop {
            match self.store.kv_set(OFFSET_KEY, &next.to_string()).await {
                Ok(()) => return true,
                Err(e) => tracing::warn!(error = %e, "cannot store the Telegram offset; retrying"),
            }
            if backoff.wait(stop).await.is_err() {
                return false;
            }
        }
    }
}

/// Retrying a store call: quick at first, never slower than every 10 s.
fn store_retry() -> Backoff {
    Backoff::new(Duration::from_millis(200), Duration::from_secs(10))
}
