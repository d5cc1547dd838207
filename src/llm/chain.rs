//! Retries with backoff (honouring Retry-After) and fallback to the next configured provider.
//!
//! Backoff comes from `backon`; the only Herald logic here is which errors are retried, how
//! long a provider's Retry-After may hold a turn, and the order of fallbacks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use tracing::field::Empty;
use tracing::Instrument;

use super::{CallOpts, ChatRequest, ChatResponse, DeltaSink, LlmError, Provider};

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// A Retry-After longer than this is cut to it (the turn has a deadline too).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// The main provider followed by its fallbacks.
#[derive(Clone)]
pub struct ProviderChain {
    providers: Vec<Arc<dyn Provider>>,
    policy: RetryPolicy,
}

impl ProviderChain {
    pub fn new(providers: Vec<Arc<dyn Provider>>, policy: RetryPolicy) -> ProviderChain {
        assert!(!providers.is_empty(), "a provider chain needs a provider");
        ProviderChain { providers, policy }
    }

    pub fn primary_name(&self) -> String {
        self.providers[0].name()
    }

    /// Sends the request to the first provider that answers, retrying each as the policy says.
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.call(req, CallOpts::default()).await
    }

    /// [`ProviderChain::chat`], streamed to `sink` when there is one.
    pub async fn chat_with(
        &self,
        req: &ChatRequest,
        sink: Option<&dyn DeltaSink>,
    ) -> Result<ChatResponse, LlmError> {
        self.call(req, CallOpts { sink, meter: None }).await
    }

    /// The request, streamed and metered as `opts` says. Every attempt after the first (a
    /// retry or a fallback) restarts the sink first, so what it shows is always one attempt's
    /// text. The meter reserves before each provider is asked (its model has its own price)
    /// and settles once that provider has answered or given up; a refusal ends the call.
    pub async fn call(
        &self,
        req: &ChatRequest,
        opts: CallOpts<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let sink = opts.sink;
        let attempts = std::sync::atomic::AtomicU32::new(0);
        let attempt = |provider: &Arc<dyn Provider>| {
            let provider = provider.clone();
            let attempts = &attempts;
            async move {
                match sink {
                    None => provider.chat(req).await,
                    Some(sink) => {
                        if attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed) > 0 {
                            sink.restart();
                        }
                        provider.chat_stream(req, sink).await
                    }
                }
            }
        };
        let mut last = LlmError::NotConfigured;
        for (i, provider) in self.providers.iter().enumerate() {
            let name = provider.name();
            let backoff = ExponentialBuilder::default()
                .with_min_delay(self.policy.min_delay)
                .with_max_delay(self.policy.max_delay)
                .with_max_times(self.policy.max_retries as usize)
                .with_jitter();
            let cap = self.policy.max_retry_after;
            let started = Instant::now();
            // One span per provider (retries included), a child of the turn; the token usage
            // attributes follow OpenTelemetry's gen_ai names.
            let model = provider.model();
            let hold = match opts.meter {
                Some(meter) => Some(meter.reserve(&model, req).await?),
                None => None,
            };
            let span = tracing::info_span!(
                "llm.call",
                provider = %name,
                outcome = Empty,
                gen_ai.usage.input_tokens = Empty,
                gen_ai.usage.output_tokens = Empty,
                gen_ai.usage.cache_read_tokens = Empty,
                gen_ai.usage.cache_write_tokens = Empty,
            );
            let result = (|| attempt(provider))
                .retry(backoff)
                .when(|e: &LlmError| e.is_retryable())
                .adjust(move |e: &LlmError, planned: Option<Duration>| match (e, planned) {
                    // The provider said when; wait that long (capped), even if backon's own
                    // schedule would have waited less.
                    (LlmError::RateLimited { retry_after: Some(wait) }, Some(_)) => {
                        Some((*wait).min(cap))
                    }
                    (_, planned) => planned,
                })
                .notify(|e: &LlmError, wait: Duration| {
                    metrics::counter!("herald_llm_retries_total", "provider" => name.clone(), "class" => e.class()).increment(1);
                    tracing::warn!(provider = %name, error = %e, wait_ms = wait.as_millis() as u64, "model call failed; retrying");
                })
                .instrument(span.clone())
                .await;
            let elapsed = started.elapsed().as_secs_f64();
            if let (Some(meter), Some(hold)) = (opts.meter, hold) {
                meter
                    .settle(hold, &model, result.as_ref().ok().map(|r| r.usage))
                    .await;
            }
            match result {
                Ok(resp) => {
                    answered(&span, &name, &resp.usage, elapsed);
                    return Ok(resp);
                }
                Err(e) => {
                    span.record("outcome", e.class());
                    metrics::counter!("herald_llm_calls_total", "provider" => name.clone(), "outcome" => e.class()).increment(1);
                    if i + 1 < self.providers.len() {
                        tracing::warn!(provider = %name, error = %e, next = %self.providers[i + 1].name(), "model provider gave up; falling back");
                    }
                    last = e;
                }
            }
        }
        Err(last)
    }
}

/// Records an answered call on its span (OpenTelemetry's gen_ai usage names) and in the
/// metrics: the call, its duration, and its tokens by bucket.
fn answered(span: &tracing::Span, name: &str, usage: &super::Usage, elapsed: f64) {
    span.record("outcome", "ok");
    span.record("gen_ai.usage.input_tokens", usage.prompt_total());
    span.record("gen_ai.usage.output_tokens", usage.output);
    span.record("gen_ai.usage.cache_read_tokens", usage.cache_read);
    span.record("gen_ai.usage.cache_write_tokens", usage.cache_write);
    let provider = name.to_string();
    metrics::counter!("herald_llm_calls_total", "provider" => provider.clone(), "outcome" => "ok")
        .increment(1);
    metrics::histogram!("herald_llm_call_duration_seconds", "provider" => provider.clone())
        .record(elapsed);
    for (bucket, n) in [
        ("fresh_input", usage.fresh_input),
        ("output", usage.output),
        ("cache_read", usage.cache_read),
        ("cache_write", usage.cache_write),
    ] {
        metrics::counter!("herald_llm_tokens_total", "provider" => provider.clone(), "bucket" => bucket)
            .increment(n);
    }
    metrics::counter!("herald_llm_cache_read_tokens_total", "provider" => provider.clone())
        .increment(usage.cache_read);
    metrics::counter!("herald_llm_cache_write_tokens_total", "provider" => provider)
        .increment(usage.cache_write);
}
