//! The daemon's event stream (`GET <url>/api/v1/events`, Server-Sent Events): each
//! `receive` event's data is one envelope, handed to the [`Receiver`] in order. The stream is
//! opened again whenever it ends, fails or falls silent past the daemon's keep-alive, with a
//! doubling backoff while the daemon cannot be reached (1 s up to 60 s, reset once a stream
//! is open), and nothing read is dropped: an event whose inbox write fails is tried again
//! until it is in or the adapter stops.
//!
//! What the stream cannot promise: it has no acknowledgement, so an envelope signal-cli wrote
//! just before Herald died, and that never reached the inbox, is not written again by the
//! daemon. Run signal-cli with `--receive-mode=on-connection` so that it receives from
//! Signal's server only while a stream is open (docs/platforms/signal.md).
//!
//! Must not: log an event's data (it holds what people wrote).

use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::receive::Receiver;
use crate::tasks::Backoff;

/// signal-cli writes a keep-alive every 15 s; a stream silent for this long is dead.
const SILENT: Duration = Duration::from_secs(45);

pub struct Stream {
    pub receiver: Arc<Receiver>,
    pub url: String,
    pub http: reqwest::Client,
}

impl Stream {
    /// Reads streams until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            match self.once(&cancel, &mut backoff).await {
                Ok(()) => tracing::info!("signal event stream ended; opening it again"),
                Err(e) => tracing::warn!(error = %e, "signal event stream failed; retrying"),
            }
            metrics::counter!("herald_signal_stream_reconnects_total").increment(1);
            if backoff.wait(&cancel).await.is_err() {
                return;
            }
        }
    }

    /// One stream, from connect to its end; `Ok` when it ended or the adapter stops.
    async fn once(&self, cancel: &CancellationToken, backoff: &mut Backoff) -> anyhow::Result<()> {
        let res = tokio::select! {
            res = self.http.get(&self.url).header("Accept", "text/event-stream").send() => res,
            () = cancel.cancelled() => return Ok(()),
        };
        let res = res.map_err(|e| anyhow::anyhow!("{}", e.without_url()))?;
        if !res.status().is_success() {
            anyhow::bail!("HTTP {} (is the account registered?)", res.status());
        }
        tracing::info!("signal event stream open");
        backoff.reset();
        let mut events = res.bytes_stream().eventsource();
        loop {
            let next = tokio::select! {
                next = tokio::time::timeout(SILENT, events.next()) => next,
                () = cancel.cancelled() => return Ok(()),
            };
            let event = match next {
                Err(_) => anyhow::bail!("no keep-alive for {SILENT:?}"),
                Ok(None) => return Ok(()),
                Ok(Some(Err(e))) => anyhow::bail!("{e}"),
                Ok(Some(Ok(event))) => event,
            };
            if event.event != "receive" || event.data.is_empty() {
                continue;
            }
            self.deliver(&event.data, cancel).await;
            if cancel.is_cancelled() {
                return Ok(());
            }
        }
    }

    /// Hands one event to the receiver, again and again while the store cannot take it.
    async fn deliver(&self, data: &str, cancel: &CancellationToken) {
        let mut retry = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
        loop {
            match self.receiver.handle(data).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "a Signal message could not be stored; retrying");
                    if retry.wait(cancel).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}
