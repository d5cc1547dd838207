//! Logs, traces and metrics: the tracing subscriber (human or JSON logs, plus OpenTelemetry
//! export when configured) and the Prometheus recorder.
//!
//! All are process-global, so all are installed at most once; several app instances in one
//! test process share them. Secrets never reach a log line because config values that hold
//! them are `Secret`s, whose `Debug` prints `***`.

pub mod alloc_count;
mod otlp;
pub mod sdnotify;

pub use otlp::Telemetry;

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

use crate::config::{LogConfig, LogFormat, TelemetryConfig};

static METRICS: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the global Prometheus recorder (once) and returns its handle.
pub fn metrics() -> PrometheusHandle {
    METRICS
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Suffix("duration_seconds".into()),
                    &[
                        0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                        60.0, 120.0,
                    ],
                )
                .expect("static bucket list is valid");
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics may be empty");
            }
            handle
        })
        .clone()
}

/// Installs the tracing subscriber. Returns false when one was already set (tests).
pub fn init_logging(cfg: &LogConfig) -> bool {
    init(cfg, &TelemetryConfig::default()).1
}

/// Installs the tracing subscriber with the OTLP trace exporter when
/// `telemetry.otlp_endpoint` is set. The returned [`Telemetry`] must be shut down last, after
/// the app stopped, to flush the spans still queued. The bool is false when a subscriber was
/// already set.
pub fn init(cfg: &LogConfig, telemetry: &TelemetryConfig) -> (Telemetry, bool) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(quiet_deps(&cfg.level)))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr, so a command's stdout holds only its output (`herald prompt show
    // --raw > file`, `skills list | …`); journald and container runtimes collect both streams.
    // Colour codes only for a person at a terminal: journald, files, pipes and log shippers
    // get plain lines, and NO_COLOR (https://no-color.org) turns them off everywhere.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(colour(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR"),
        ));
    let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = vec![match cfg.format {
        LogFormat::Json => fmt.json().flatten_event(true).with_filter(filter).boxed(),
        LogFormat::Human => fmt.fmt_fields(human_fields()).with_filter(filter).boxed(),
    }];
    let (otel, handle) = otlp::layer(telemetry);
    layers.extend(otel);
    let installed = tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .is_ok();
    (handle, installed)
}

/// `text` with control characters (ESC, BEL, NUL, newlines, C1) and line or paragraph
/// separators written as escapes (`\u{1b}`): a log field that quotes outside text (a message,
/// a sender id, a tool argument, a matched phrase) can then neither colour a terminal, ring
/// it, nor forge a log line of its own.
pub fn escape(text: &str) -> String {
    if !text.chars().any(needs_escape) {
        return text.to_string();
    }
    text.chars()
        .map(|c| {
            if needs_escape(c) {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Human log lines format every field through [`escape`], so no call site can forget to.
/// (JSON lines are escaped by the JSON encoder.)
fn human_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static
{
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = escape(&format!("{value:?}"));
        if field.name() == "message" {
            write!(w, "{text}")
        } else {
            write!(w, "{field}={text}")
        }
    })
    .delimited(" ")
}

/// The configured level with the MCP SDK held at warn (it logs every session's start and end at
/// info) unless the level names it.
fn quiet_deps(level: &str) -> String {
    if level.contains("rmcp") {
        level.to_string()
    } else {
        format!("{level},rmcp=warn")
    }
}

/// Whether human log lines carry ANSI colour: only on a terminal, and never when `NO_COLOR`
/// is set to anything but the empty string.
fn colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::{colour, escape, human_fields};
    use std::sync::{Arc, Mutex};

    #[test]
    fn human_log_lines_escape_control_characters_in_every_field() {
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_ansi(false)
            .fmt_fields(human_fields())
            .with_writer(move || out.clone())
            .finish();
        tracing::subscriber::with_default(sub, || {
            let hostile = "a\u{1b}[31mb\u{7}\u{0}\nFAKE line\u{2028}";
            tracing::warn!(entry = %hostile, sender = hostile, "quoted {}", hostile);
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\0'));
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains("entry=a\\u{1b}[31mb\\u{7}\\0\\nFAKE"),
            "{text}"
        );
        assert_eq!(escape("plain café"), "plain café");
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some("".into())));
        assert!(!colour(true, Some("1".into())));
        assert!(!colour(false, None));
    }
}
