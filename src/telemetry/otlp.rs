//! OpenTelemetry traces over OTLP/HTTP: one trace per turn (the `turn` root span and its
//! children: store, lease, hooks, model calls, tools), and one per outbox send.
//!
//! Export must never block or fail a turn: spans go to the SDK's batch processor, which runs
//! on its own thread with the blocking HTTP client and drops spans when its queue is full or
//! the collector is down. Only Herald's own spans are exported (the HTTP client the exporter
//! uses must not trace itself into the queue it drains).

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::{Layer, Registry};

use crate::config::TelemetryConfig;

/// The exporter's handle; [`Telemetry::shutdown`] flushes it.
#[derive(Default)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    pub fn enabled(&self) -> bool {
        self.provider.is_some()
    }

    /// Flushes queued spans and stops the exporter. Blocking: call it outside the async
    /// runtime (or in `spawn_blocking`), as the last step of shutdown.
    pub fn shutdown(self) {
        if let Some(p) = self.provider {
            if let Err(e) = p.shutdown_with_timeout(Duration::from_secs(5)) {
                eprintln!("herald: flushing traces failed: {e}");
            }
        }
    }
}

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// The OpenTelemetry layer, when an endpoint is configured. A broken exporter is reported
/// and leaves Herald running without traces.
pub(super) fn layer(cfg: &TelemetryConfig) -> (Option<BoxedLayer>, Telemetry) {
    let Some(endpoint) = cfg.otlp_endpoint.as_ref().map(|u| u.as_str()) else {
        return (None, Telemetry::default());
    };
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .with_timeout(Duration::from_secs(5))
        .build()
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("herald: OTLP exporter not started ({e}); running without traces");
            return (None, Telemetry::default());
        }
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(cfg.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("herald");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(Targets::new().with_target("herald", tracing::Level::INFO))
        .boxed();
    (
        Some(layer),
        Telemetry {
            provider: Some(provider),
        },
    )
}
