//! What starts a reload without a request: SIGHUP (listened for before the daemon starts, so
//! an early one is queued until it is ready instead of ending the process), and with `reload.watch` the config file's
//! modification time, looked at every second (no watcher crate: one `stat` a second is
//! enough for a file an operator edits). Both are tasks on the app's tracker.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::Reloader;

/// SIGHUPs, listened for from the moment this is made. `herald serve` makes it before the
/// daemon starts: from then on a SIGHUP no longer ends the process (its default action), and
/// one that comes during the start is taken once the daemon is ready.
pub struct Hangups {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangups {
    pub fn listen() -> Hangups {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let signal = signal(SignalKind::hangup())
                .inspect_err(
                    |e| tracing::warn!(error = %e, "cannot listen for SIGHUP; use `herald reload`"),
                )
                .ok();
            Hangups { signal }
        }
        #[cfg(not(unix))]
        Hangups {}
    }
}

/// Reloads at every SIGHUP `hangups` hears (one heard before this runs included) until
/// `cancel`.
pub async fn on_sighup(reloader: Arc<Reloader>, hangups: Hangups, cancel: CancellationToken) {
    #[cfg(unix)]
    {
        let Some(mut hup) = hangups.signal else {
            return;
        };
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                got = hup.recv() => {
                    if got.is_none() {
                        return;
                    }
                    tracing::info!("SIGHUP: reloading the configuration");
                    let _ = reloader.reload().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = hangups;
        cancel.cancelled().await;
    }
}

/// What tells a saved file from the one seen before: its modification time and length.
fn stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Reloads when the source file's modification time (or length) changes, looking every
/// `every`. The file as it is now, when this is called, is the one already running.
pub fn on_file_change(
    reloader: Arc<Reloader>,
    every: Duration,
    cancel: CancellationToken,
) -> impl std::future::Future<Output = ()> + Send {
    let path = reloader.source().and_then(|s| s.file);
    let mut seen = path.as_deref().and_then(stamp);
    async move {
        let Some(path) = path else {
            return;
        };
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            let now = stamp(&path);
            if now != seen && now.is_some() {
                seen = now;
                tracing::info!(file = %path.display(), "the config file changed: reloading");
                let _ = reloader.reload().await;
            }
        }
    }
}
