//! The outbox sender loop: claim due rows, deliver each once, record the platform message id.
//!
//! Rows of one lane are sent in order and one at a time; lanes are sent concurrently. A failed
//! chunk holds back the rest of its lane (the claim query guarantees this across rounds too),
//! so a reply never arrives with a hole in the middle. The only window for a duplicate is a
//! crash between the platform accepting a message and our `mark_sent` commit; the claim TTL
//! makes such a row retry after the crash, because losing a reply is worse.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Outbounds, SendError};
use crate::domain::Platform;
use crate::store::{now_ms, OutboxRow, Store, StoreError};

pub struct Sender {
    pub store: Arc<dyn Store>,
    pub outbounds: Outbounds,
    pub holder: String,
    pub wake: Arc<Notify>,
    pub poll: Duration,
    pub batch: i64,
    pub max_attempts: i64,
}

const CLAIM_TTL: Duration = Duration::from_secs(60);
/// How long shutdown keeps delivering already-committed replies.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);

impl Sender {
    pub async fn run(self, cancel: CancellationToken) {
        let platforms = self.outbounds.platforms();
        if platforms.is_empty() {
            return;
        }
        let mut draining_since: Option<std::time::Instant> = None;
        loop {
            let sent = match self
                .store
                .outbox_claim(&self.holder, &platforms, self.batch, CLAIM_TTL)
                .await
            {
                Ok(rows) if rows.is_empty() => 0,
                Ok(rows) => {
                    let n = rows.len();
                    self.deliver(rows).await;
                    n
                }
                Err(e) => {
                    tracing::warn!(error = %e, "outbox claim failed; will retry");
                    0
                }
            };
            if cancel.is_cancelled() {
                // Shutdown: replies committed by the last turns go out before we stop; one
                // bounded drain, whatever is left stays queued for the next start.
                if sent == 0
                    || draining_since
                        .get_or_insert_with(std::time::Instant::now)
                        .elapsed()
                        > DRAIN_LIMIT
                {
                    return;
                }
                continue;
            }
            if sent > 0 {
                continue; // more may be due
            }
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(self.poll) => {}
            }
        }
    }

    async fn deliver(&self, rows: Vec<OutboxRow>) {
        let mut by_lane: BTreeMap<String, Vec<OutboxRow>> = BTreeMap::new();
        for r in rows {
            by_lane.entry(r.lane.clone()).or_default().push(r);
        }
        let lanes = by_lane.into_values().map(|rows| self.deliver_lane(rows));
        futures::future::join_all(lanes).await;
    }

    async fn deliver_lane(&self, rows: Vec<OutboxRow>) {
        let mut rest = rows.into_iter();
        while let Some(row) = rest.next() {
            if !self.deliver_one(&row).await {
                // Keep the lane's order: give the remaining claims back untouched.
                for r in rest.by_ref() {
                    if let Err(e) = self.store.outbox_release(r.id).await {
                        tracing::warn!(error = %e, outbox_id = r.id, "could not release claim");
                    }
                }
            }
        }
    }

    /// Returns whether the row left the queue (sent, or failed for good).
    async fn deliver_one(&self, row: &OutboxRow) -> bool {
        let Some(platform) = Platform::parse(&row.platform) else {
            return self.give_up(row, "unknown platform").await;
        };
        let Some(outbound) = self.outbounds.get(platform) else {
            let _ = self.store.outbox_release(row.id).await;
            return false;
        };
        let started = std::time::Instant::now();
        match outbound.send(row).await {
            Ok(platform_id) => {
                metrics::counter!("herald_outbox_sent_total", "platform" => row.platform.clone())
                    .increment(1);
                metrics::histogram!("herald_send_duration_seconds", "platform" => row.platform.clone())
                    .record(started.elapsed().as_secs_f64());
                if let Err(e) = self.mark_sent(row.id, &platform_id).await {
                    tracing::error!(error = %e, outbox_id = row.id, "sent but could not record it");
                }
                tracing::debug!(lane = %row.lane, outbox_id = row.id, platform_message_id = %platform_id, "reply chunk delivered");
                true
            }
            Err(err) => {
                metrics::counter!("herald_platform_send_errors_total", "platform" => row.platform.clone(), "kind" => error_kind(&err)).increment(1);
                let attempts = row.attempts + 1;
                let give_up =
                    matches!(err, SendError::Permanent(_)) || attempts >= self.max_attempts;
                let wait = match &err {
                    SendError::RetryAfter(d) => {
                        metrics::counter!("herald_rate_limit_waits_total", "platform" => row.platform.clone()).increment(1);
                        *d
                    }
                    _ => backoff(attempts),
                };
                tracing::warn!(lane = %row.lane, outbox_id = row.id, attempts, error = %err, give_up, "reply chunk not delivered");
                if give_up {
                    metrics::counter!("herald_outbox_failed_total", "platform" => row.platform.clone()).increment(1);
                }
                let next = now_ms() + wait.as_millis() as i64;
                if let Err(e) = self
                    .store
                    .outbox_mark_retry(row.id, &err.to_string(), next, give_up)
                    .await
                {
                    tracing::warn!(error = %e, outbox_id = row.id, "could not record send failure");
                }
                give_up
            }
        }
    }

    async fn give_up(&self, row: &OutboxRow, why: &str) -> bool {
        let _ = self
            .store
            .outbox_mark_retry(row.id, why, now_ms(), true)
            .await;
        true
    }

    /// Recording a send must survive a brief store outage: retry a few times.
    async fn mark_sent(&self, id: i64, platform_id: &str) -> Result<(), StoreError> {
        let mut delay = Duration::from_millis(100);
        for _ in 0..8 {
            match self.store.outbox_mark_sent(id, platform_id).await {
                Err(StoreError::Unavailable(_)) => {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                other => return other,
            }
        }
        self.store.outbox_mark_sent(id, platform_id).await
    }
}

fn error_kind(e: &SendError) -> &'static str {
    match e {
        SendError::RetryAfter(_) => "rate_limited",
        SendError::Transient(_) => "transient",
        SendError::Permanent(_) => "permanent",
    }
}

fn backoff(attempts: i64) -> Duration {
    let secs = 2u64.saturating_pow(attempts.clamp(0, 8) as u32).min(300);
    Duration::from_secs(secs)
}
