//! What an operator sees when decoding one Telegram update panics: an error line naming the
//! update, the malformed counter up by one, and the caller told to skip it. No wire input is
//! known to panic the decode (the fuzz target's entity panic is fixed in `inbound.rs`), so
//! the panic comes from a closure; the wrapper is the same one `Receiver::handle` runs.

use std::io;
use std::sync::{Arc, Mutex};

use metrics_exporter_prometheus::PrometheusBuilder;

use super::contain_panic;

/// Log output captured by a test subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with its logs and metrics captured; returns its value, the log text and the
/// Prometheus rendering.
fn observed<T>(f: impl FnOnce() -> T) -> (T, String, String) {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let out = tracing::subscriber::with_default(subscriber, || {
        metrics::with_local_recorder(&recorder, f)
    });
    let text = String::from_utf8(logs.0.lock().expect("log buffer").clone()).expect("utf-8 logs");
    (out, text, handle.render())
}

#[test]
fn a_panicking_decode_is_logged_counted_and_skipped() {
    let (out, logs, metrics) = observed(|| {
        contain_panic(Some(981_234), || -> u32 {
            panic!("entity offset 7 is not a char boundary")
        })
    });
    assert_eq!(out, None, "the update is skipped");
    let line = logs
        .lines()
        .find(|l| l.contains("panicked"))
        .unwrap_or_else(|| panic!("no log line for the panic: {logs:?}"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(line.contains("update_id=981234"), "{line}");
    assert!(
        line.contains("entity offset 7 is not a char boundary"),
        "{line}"
    );
    assert!(
        metrics.contains(r#"herald_telegram_updates_total{outcome="malformed"} 1"#),
        "{metrics}"
    );
}

#[test]
fn a_decode_that_returns_is_passed_through_unlogged() {
    let (out, logs, metrics) = observed(|| contain_panic(Some(5), || "decision"));
    assert_eq!(out, Some("decision"));
    assert!(!logs.contains("panicked"), "{logs}");
    assert!(!metrics.contains("malformed"), "{metrics}");
}

/// A panic with a formatted (owned) message keeps its text in the log, and an update with no
/// readable id is still reported.
#[test]
fn an_owned_panic_message_without_update_id_is_reported() {
    let (out, logs, _) = observed(|| {
        contain_panic::<()>(None, || {
            let at = 3;
            panic!("slice index {at} out of range")
        })
    });
    assert_eq!(out, None);
    assert!(logs.contains("slice index 3 out of range"), "{logs}");
    assert!(logs.contains("ERROR"), "{logs}");
}
