//! What starts a reload without a request: SIGHUP, and with `reload.watch` the config file's
//! modification time, looked at every second (no watcher crate: one `stat` a second is
//! enough for a file an operator edits). Both are tasks on the app's tracker.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::Reloader;

/// Reloads at every SIGHUP until `cancel`.
pub async fn on_sighup(reloader: Arc<Reloader>, cancel: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP; use `herald reload`");
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
    cancel.cancelled().await;
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
