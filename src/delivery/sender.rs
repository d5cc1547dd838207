//! The outbox sender loop: claim due rows, deliver each once, record the platform message id.
//!
//! Rows of one lane are sent in order and one at a time; each lane is sent on its own task
//! (`inflight.rs`), and the loop claims again as soon as any lane finishes. A failed
//! chunk holds back the rest of its lane (the claim query guarantees this across rounds too),
//! and a chunk that fails for good stops the later chunks of its reply, which one notice
//! replaces: a reply never arrives with a hole in the middle. The only window for a duplicate is a
//! crash between the platform accepting a message and our `mark_sent` commit; the claim TTL
//! makes such a row retry after the crash, because losing a reply is worse. A file row has the
//! same window (the platform took the upload, `mark_sent` did not commit): it is uploaded again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::inflight::{Claimed, InFlight};
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
    /// Claims due rows and delivers each lane on its own task: a lane that finishes (or a
    /// wake) lets the loop claim again at once, while other lanes are still sending.
    pub async fn run(self, cancel: CancellationToken) {
        let platforms = self.outbounds.platforms();
        if platforms.is_empty() {
            return;
        }
        let this = Arc::new(self);
        // Set once the shutdown drain is over: lanes stop after the row they are sending.
        let stop = CancellationToken::new();
        let start = |claimed: Claimed| this.clone().deliver_lane(claimed, stop.clone());
        let mut lanes = InFlight::default();
        let mut draining_since: Option<Instant> = None;
        loop {
            let room = (this.batch.max(1) as usize).saturating_sub(lanes.outstanding());
            let claimed = if room == 0 || stop.is_cancelled() {
                0
            } else {
                this.claim(&platforms, room, &mut lanes, &start).await
            };
            // A claim that got fewer rows than it asked for took everything due: the next one
            // waits for a lane to finish, a wake or the poll (one empty claim per turn, not two).
            let more_due =
                claimed > 0 && claimed == room && lanes.outstanding() < this.batch.max(1) as usize;
            if cancel.is_cancelled() {
                // Shutdown: replies committed by the last turns go out before we stop; one
                // bounded drain, whatever is left stays queued for the next start.
                let deadline = *draining_since.get_or_insert_with(Instant::now) + DRAIN_LIMIT;
                if Instant::now() >= deadline {
                    stop.cancel();
                }
                if lanes.is_empty() && (claimed == 0 || stop.is_cancelled()) {
                    return;
                }
                if !more_due || stop.is_cancelled() {
                    tokio::select! {
                        _ = lanes.join_next(&start) => {}
                        _ = tokio::time::sleep_until(deadline.into()), if !stop.is_cancelled() => {}
                    }
                }
                continue;
            }
            if more_due {
                continue;
            }
            tokio::select! {
                _ = lanes.join_next(&start), if !lanes.is_empty() => {}
                _ = cancel.cancelled() => {}
                _ = this.wake.notified() => {}
                _ = tokio::time::sleep(this.poll) => {}
            }
        }
    }

    /// One claim of at most `room` rows, handed to their lanes; returns how many were claimed.
    async fn claim<F, Fut>(
        &self,
        platforms: &[String],
        room: usize,
        lanes: &mut InFlight,
        start: &F,
    ) -> usize
    where
        F: Fn(Claimed) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let at = Instant::now();
        match self
            .store
            .outbox_claim(&self.holder, platforms, room as i64, CLAIM_TTL)
            .await
        {
            Ok(rows) => {
                let n = rows.len();
                lanes.add(at, rows, start);
                n
            }
            Err(e) => {
                tracing::warn!(error = %e, "outbox claim failed; will retry");
                0
            }
        }
    }

    /// Sends one lane's claimed rows in order, one at a time. Rows claimed longer ago than a
    /// third of the claim TTL (or any, once the drain is over) go back unsent and are claimed
    /// afresh: a long reply at a group's pace never sends a row whose claim may have lapsed, so
    /// another replica never takes it over while it is being sent here.
    async fn deliver_lane(self: Arc<Self>, claimed: Claimed, stop: CancellationToken) {
        let mut rest = claimed.rows.into_iter();
        // The reply whose chunk failed for good in this round: its later chunks were failed in
        // the store and must not go out from this claim either.
        let mut stopped: Option<ReplyKey> = None;
        while let Some(row) = rest.next() {
            if stopped.is_some() && stopped == row.reply() {
                continue;
            }
            if stop.is_cancelled() || claimed.at.elapsed() >= CLAIM_TTL / 3 {
                for r in std::iter::once(row).chain(rest.by_ref()) {
                    if let Err(e) = self.store.outbox_release(r.id, &self.holder).await {
                        tracing::warn!(error = %e, outbox_id = r.id, "could not release claim");
                    }
                }
                break;
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
                        if let Err(e) = self.store.outbox_release(r.id, &self.holder).await {
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
                    metrics::counter!("herald_outbox_replies_cut_total", "platform" => row.platform.to_string()).increment(1);
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
            let _ = self.store.outbox_release(row.id, &self.holder).await;
            return Delivery::Held;
        };
        // The attempt is counted before the send, so a row whose sending crashes the process
        // counts each time and ends failed instead of crashing every restart.
        let attempts = match self.store.outbox_start(row.id, &self.holder).await {
            Ok(Some(n)) => n,
            Ok(None) => {
                tracing::debug!(
                    outbox_id = row.id,
                    "claim passed to another sender; not sent here"
                );
                return Delivery::Held;
            }
            Err(e) => {
                tracing::warn!(error = %e, outbox_id = row.id, "cannot count a send attempt; the row waits");
                let _ = self.store.outbox_release(row.id, &self.holder).await;
                return Delivery::Held;
            }
        };
        if attempts > self.max_attempts {
            return self.abandon(row, attempts - 1).await;
        }
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
                metrics::counter!("herald_outbox_sent_total", "platform" => row.platform.to_string())
                    .increment(1);
                metrics::histogram!("herald_send_duration_seconds", "platform" => row.platform.to_string())
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
                metrics::counter!("herald_platform_send_errors_total", "platform" => row.platform.to_string(), "kind" => error_kind(&err)).increment(1);
                let give_up =
                    matches!(err, SendError::Permanent(_)) || attempts >= self.max_attempts;
                let wait = match &err {
                    SendError::RetryAfter(d) => {
                        metrics::counter!("herald_rate_limit_waits_total", "platform" => row.platform.to_string()).increment(1);
                        *d
                    }
                    _ => backoff(attempts),
                };
                tracing::warn!(lane = %row.lane, outbox_id = row.id, attempts, error = %err, give_up, "reply chunk not delivered");
                if give_up {
                    metrics::counter!("herald_outbox_failed_total", "platform" => row.platform.to_string()).increment(1);
                }
                let next = now_ms() + wait.as_millis() as i64;
                if let Err(e) = self
                    .store
                    .outbox_mark_retry(row.id, &self.holder, &err.to_string(), next, give_up)
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

    /// A row whose last `tries` sends all ended without a result (the process crashed or was
    /// killed while sending it): failed unsent, like a chunk that failed for good.
    async fn abandon(&self, row: &OutboxRow, tries: i64) -> Delivery {
        metrics::counter!("herald_outbox_dead_total", "platform" => row.platform.to_string())
            .increment(1);
        metrics::counter!("herald_outbox_failed_total", "platform" => row.platform.to_string())
            .increment(1);
        tracing::error!(lane = %row.lane, outbox_id = row.id, attempts = tries,
            "reply chunk abandoned: every send of it ended without a result (crash or kill)");
        let error = format!(
            "abandoned: {tries} sends ended without a result (the sender crashed or was killed while sending it)"
        );
        if let Err(e) = self
            .store
            .outbox_mark_retry(row.id, &self.holder, &error, now_ms(), true)
            .await
        {
            tracing::warn!(error = %e, outbox_id = row.id, "could not record an abandoned row");
        }
        Delivery::GaveUp
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
