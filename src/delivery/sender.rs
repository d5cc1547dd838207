//! The outbox sender loop: claim due rows, deliver each once, record the platform message id.
//!
//! Rows of one lane are sent in order and one at a time; lanes are sent concurrently. A failed
//! chunk holds back the rest of its lane (the claim query guarantees this across rounds too),
//! and a chunk that fails for good stops the later chunks of its reply, which one notice
//! replaces: a reply never arrives with a hole in the middle. The only window for a duplicate is a
//! crash between the platform accepting a message and our `mark_sent` commit; the claim TTL
//! makes such a row retry after the crash, because losing a reply is worse. A file row has the
//! same window (the platform took the upload, `mark_sent` did not commit): it is uploaded again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{Outbounds, SendError};
use crate::store::{now_ms, NewOutbox, OutboxKey, OutboxRow, ReplyKey, Store, StoreError};
use crate::tasks::Backoff;

pub struct Sender {
    pub store: Arc<dyn Store>,
    pub outbounds: Outbounds,
    pub holder: String,
    pub wake: Arc<Notify>,
    pub poll: Duration,
    pub batch: i64,
    pub max_attempts: i64,
    /// Where the bytes of file rows are read from.
    pub media: crate::media::MediaCache,
}

const CLAIM_TTL: Duration = Duration::from_secs(60);
/// Sent in place of the rest of a reply whose chunk could not be delivered.
pub const UNDELIVERED: &str = "(Part of this answer could not be delivered, so the rest of it \
     was not sent either. Ask again if you need it.)";

enum Delivery {
    Sent,
    /// Failed for good (refused, or out of attempts).
    GaveUp,
    /// Stays queued: a retry later, or no outbound for its platform here.
    Held,
}
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
            by_lane.entry(r.lane.to_string()).or_default().push(r);
        }
        let lanes = by_lane.into_values().map(|rows| self.deliver_lane(rows));
        futures::future::join_all(lanes).await;
    }

    async fn deliver_lane(&self, rows: Vec<OutboxRow>) {
        let mut rest = rows.into_iter();
        // The reply whose chunk failed for good in this round: its later chunks were failed in
        // the store and must not go out from this claim either.
        let mut stopped: Option<ReplyKey> = None;
        while let Some(row) = rest.next() {
            if stopped.is_some() && stopped == row.reply() {
                continue;
            }
            // Its own trace: the send may run on another replica, long after the turn; the
            // inbox id ties it to the turn that wrote it.
            let span = tracing::info_span!(
                parent: None,
                "send",
                lane = %row.lane,
                platform = %row.platform,
                outbox_id = row.id,
                inbox_id = row.inbox_id,
                chunk = row.chunk_index,
            );
            match self.deliver_one(&row).instrument(span).await {
                Delivery::Sent => {}
                Delivery::GaveUp => stopped = self.stop_reply(&row).await,
                Delivery::Held => {
                    // Keep the lane's order: give the remaining claims back untouched.
                    for r in rest.by_ref() {
                        if let Err(e) = self.store.outbox_release(r.id).await {
                            tracing::warn!(error = %e, outbox_id = r.id, "could not release claim");
                        }
                    }
                }
            }
        }
    }

    /// A chunk failed for good: a reply must not arrive with a hole in the middle, so its later
    /// chunks are failed unsent and one notice goes out instead. Returns the reply's key.
    async fn stop_reply(&self, row: &OutboxRow) -> Option<ReplyKey> {
        let reply_key = row.reply()?;
        // A notice that fails is not followed by another.
        if reply_key.is_notice() {
            return Some(reply_key);
        }
        let notice = NewOutbox {
            key: OutboxKey::chunk(reply_key.notice(), 0),
            lane: row.lane.clone(),
            platform: row.platform,
            chat_id: row.chat_id.clone(),
            thread_id: row.thread_id.clone(),
            reply_to: row.reply_to.clone(),
            inbox_id: row.inbox_id,
            chunk_index: 0,
            text: UNDELIVERED.to_string(),
            media: None,
        };
        match self
            .store
            .outbox_fail_reply(row, &reply_key, Some(&notice))
            .await
        {
            Ok(stopped) => {
                if stopped > 0 || row.chunk_index > 0 {
                    metrics::counter!("herald_outbox_replies_cut_total", "platform" => row.platform.as_str()).increment(1);
                    tracing::warn!(lane = %row.lane, outbox_id = row.id, stopped, "a reply chunk failed for good; the rest of the reply is replaced by a notice");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, outbox_id = row.id, "could not stop the rest of a failed reply")
            }
        }
        Some(reply_key)
    }

    /// Whether the row was sent, failed for good, or stays queued (holding back its lane).
    async fn deliver_one(&self, row: &OutboxRow) -> Delivery {
        let platform = row.platform;
        let Some(outbound) = self.outbounds.get(platform) else {
            let _ = self.store.outbox_release(row.id).await;
            return Delivery::Held;
        };
        let started = std::time::Instant::now();
        let (previews, sent) = if row.media.is_some() {
            let urgency = super::urgency(row);
            self.outbounds
                .pace
                .wait(platform, &row.chat_id, urgency)
                .await;
            (None, self.send_file_row(outbound.as_ref(), row).await)
        } else {
            let previews = self.previews_for(outbound, row).await;
            let sent = self
                .send_or_finalize(outbound, row, previews.as_deref())
                .await;
            (previews, sent)
        };
        match sent {
            Ok(platform_id) => {
                let elapsed = started.elapsed().as_secs_f64();
                let marked = self.mark_sent(row.id, &platform_id).await;
                // Counted once the row says so: a scrape never sees more sends than sent rows.
                metrics::counter!("herald_outbox_sent_total", "platform" => row.platform.as_str())
                    .increment(1);
                metrics::histogram!("herald_send_duration_seconds", "platform" => row.platform.as_str())
                    .record(elapsed);
                if let Err(e) = marked {
                    tracing::error!(error = %e, outbox_id = row.id, "sent but could not record it");
                } else if let Some(ids) = &previews {
                    self.after_delivery(outbound, row, ids).await;
                }
                tracing::debug!(lane = %row.lane, outbox_id = row.id, platform_message_id = %platform_id, "reply chunk delivered");
                Delivery::Sent
            }
            Err(err) => {
                metrics::counter!("herald_platform_send_errors_total", "platform" => row.platform.as_str(), "kind" => error_kind(&err)).increment(1);
                let attempts = row.attempts + 1;
                let give_up =
                    matches!(err, SendError::Permanent(_)) || attempts >= self.max_attempts;
                let wait = match &err {
                    SendError::RetryAfter(d) => {
                        metrics::counter!("herald_rate_limit_waits_total", "platform" => row.platform.as_str()).increment(1);
                        *d
                    }
                    _ => backoff(attempts),
                };
                tracing::warn!(lane = %row.lane, outbox_id = row.id, attempts, error = %err, give_up, "reply chunk not delivered");
                if give_up {
                    metrics::counter!("herald_outbox_failed_total", "platform" => row.platform.as_str()).increment(1);
                }
                let next = now_ms() + wait.as_millis() as i64;
                if let Err(e) = self
                    .store
                    .outbox_mark_retry(row.id, &err.to_string(), next, give_up)
                    .await
                {
                    tracing::warn!(error = %e, outbox_id = row.id, "could not record send failure");
                }
                if give_up {
                    Delivery::GaveUp
                } else {
                    Delivery::Held
                }
            }
        }
    }

    /// Recording a send must survive a brief store outage: retry a few times.
    async fn mark_sent(&self, id: i64, platform_id: &str) -> Result<(), StoreError> {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        for _ in 0..8 {
            match self.store.outbox_mark_sent(id, platform_id).await {
                Err(StoreError::Unavailable(_)) => backoff.pause().await,
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
