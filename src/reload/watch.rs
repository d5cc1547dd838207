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

fn modified(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Reloads when the source file's modification time changes, looking every `every`.
pub async fn on_file_change(reloader: Arc<Reloader>, every: Duration, cancel: CancellationToken) {
    let Some(path) = reloader.source().and_then(|s| s.file) else {
        return;
    };
    let mut seen = modified(&path);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        let now = modified(&path);
        if now != seen && now.is_some() {
            seen = now;
            tracing::info!(file = %path.display(), "the config file changed: reloading");
            let _ = reloader.reload().await;
        }
    }
}
