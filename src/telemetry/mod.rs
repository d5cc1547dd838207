//! Logs and metrics: the tracing subscriber (human or JSON) and the Prometheus recorder.
//!
//! Both are process-global, so both are installed at most once; several app instances in one
//! test process share them. Secrets never reach a log line because config values that hold
//! them are `Secret`s, whose `Debug` prints `***`.

pub mod sdnotify;

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

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
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let res = match cfg.format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Human => builder.try_init(),
    };
    res.is_ok()
}
