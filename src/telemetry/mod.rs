//! Logs, traces and metrics: the tracing subscriber (human or JSON logs, plus OpenTelemetry
//! export when configured) and the Prometheus recorder.
//!
//! All are process-global, so all are installed at most once; several app instances in one
//! test process share them. Secrets never reach a log line because config values that hold
//! them are `Secret`s, whose `Debug` prints `***`.

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
        LogFormat::Human => fmt.with_filter(filter).boxed(),
    }];
    let (otel, handle) = otlp::layer(telemetry);
    layers.extend(otel);
    let installed = tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .is_ok();
    (handle, installed)
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
    use super::colour;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some("".into())));
        assert!(!colour(true, Some("1".into())));
        assert!(!colour(false, None));
    }
}
