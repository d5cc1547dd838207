//! systemd readiness and watchdog notifications (`sd_notify`), without libsystemd.
//!
//! With `Type=notify` systemd waits for `READY=1` before it calls the unit started, and with
//! `WatchdogSec=` it restarts a daemon that stops sending `WATCHDOG=1`. The pings come from a
//! task on the async runtime, so a runtime that stops scheduling stops pinging — that is the
//! hang the watchdog exists to catch. Outside systemd (`NOTIFY_SOCKET` unset) every call is a
//! no-op. A failed notification is logged and never stops the daemon: the worst outcome is
//! systemd's own timeout, which names the cause in `systemctl status`.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Where notifications go: the `NOTIFY_SOCKET` path, or an abstract name when it starts `@`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notifier {
    target: String,
}

impl Notifier {
    /// The notifier systemd handed us, if any.
    pub fn from_env() -> Option<Notifier> {
        std::env::var("NOTIFY_SOCKET")
            .ok()
            .filter(|s| !s.is_empty())
            .map(Notifier::new)
    }

    pub fn new(target: impl Into<String>) -> Notifier {
        Notifier {
            target: target.into(),
        }
    }

    /// Sends one datagram such as `READY=1` or `WATCHDOG=1`.
    pub fn notify(&self, state: &str) -> io::Result<()> {
        let socket = UnixDatagram::unbound()?;
        // A full receive buffer must not block a runtime thread; systemd drains it promptly.
        socket.set_nonblocking(true)?;
        match self.target.strip_prefix('@') {
            Some(name) => send_abstract(&socket, name, state),
            None => socket.send_to(state.as_bytes(), &self.target).map(|_| ()),
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn send_abstract(socket: &UnixDatagram, name: &str, state: &str) -> io::Result<()> {
    #[cfg(target_os = "android")]
    use std::os::android::net::SocketAddrExt;
    #[cfg(target_os = "linux")]
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    socket.send_to_addr(state.as_bytes(), &addr).map(|_| ())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn send_abstract(_socket: &UnixDatagram, _name: &str, _state: &str) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "abstract notify sockets exist only on Linux",
    ))
}

/// The ping interval systemd asked for: half of `WATCHDOG_USEC`, as sd_watchdog_enabled
/// advises, and only when `WATCHDOG_PID` (if set) names this process.
pub fn watchdog_interval(usec: Option<&str>, pid: Option<&str>) -> Option<Duration> {
    if let Some(pid) = pid {
        if pid.trim().parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    let usec: u64 = usec?.trim().parse().ok().filter(|u| *u > 0)?;
    Some(Duration::from_micros(usec / 2).max(Duration::from_millis(100)))
}

/// Tells systemd the daemon is ready and, when a watchdog is configured, keeps pinging it
/// until `cancel` fires. Call once, after the HTTP server is bound and the store migrated.
pub fn ready(tracker: &TaskTracker, cancel: CancellationToken) {
    let Some(notifier) = Notifier::from_env() else {
        return;
    };
    if let Err(e) = notifier.notify("READY=1") {
        tracing::warn!(error = %e, "could not tell systemd that herald is ready");
    }
    let interval = watchdog_interval(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
    );
    if let Some(every) = interval {
        tracker.spawn(watchdog(notifier, every, cancel));
    }
}

/// Tells systemd a stop is in progress, so a long drain is not mistaken for a hang.
pub fn stopping() {
    if let Some(n) = Notifier::from_env() {
        let _ = n.notify("STOPPING=1");
    }
}

async fn watchdog(notifier: Notifier, every: Duration, cancel: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {
                if let Err(e) = notifier.notify("WATCHDOG=1") {
                    tracing::warn!(error = %e, "systemd watchdog ping failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv(socket: &UnixDatagram) -> String {
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 256];
        let n = socket.recv(&mut buf).expect("a notification arrives");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn ready_reaches_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let systemd = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::new(path.to_str().unwrap());
        n.notify("READY=1").unwrap();
        assert_eq!(recv(&systemd), "READY=1");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn ready_reaches_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("herald-test-{}", uuid::Uuid::new_v4().simple());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let systemd = UnixDatagram::bind_addr(&addr).unwrap();
        Notifier::new(format!("@{name}")).notify("READY=1").unwrap();
        assert_eq!(recv(&systemd), "READY=1");
    }

    #[test]
    fn a_missing_socket_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let n = Notifier::new(dir.path().join("nobody-listens").to_str().unwrap());
        assert!(n.notify("READY=1").is_err());
    }

    #[tokio::test]
    async fn watchdog_pings_until_cancelled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let systemd = UnixDatagram::bind(&path).unwrap();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(watchdog(
            Notifier::new(path.to_str().unwrap()),
            Duration::from_millis(20),
            cancel.clone(),
        ));
        let got = tokio::task::spawn_blocking(move || (recv(&systemd), recv(&systemd), systemd))
            .await
            .unwrap();
        assert_eq!(
            (got.0.as_str(), got.1.as_str()),
            ("WATCHDOG=1", "WATCHDOG=1")
        );
        cancel.cancel();
        task.await.unwrap();
    }

    #[test]
    fn watchdog_interval_table() {
        let me = std::process::id().to_string();
        let cases: &[(Option<&str>, Option<&str>, Option<Duration>)] = &[
            (None, None, None),
            (Some("30000000"), None, Some(Duration::from_secs(15))),
            (Some("30000000"), Some(&me), Some(Duration::from_secs(15))),
            (Some("30000000"), Some("1"), None),
            (Some("0"), None, None),
            (Some("junk"), None, None),
            (Some("1000"), None, Some(Duration::from_millis(100))),
        ];
        for (usec, pid, want) in cases {
            assert_eq!(watchdog_interval(*usec, *pid), *want, "{usec:?} {pid:?}");
        }
    }
}
