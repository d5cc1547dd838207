//! Building provider chains from configuration, in one place: the main chain (the configured
//! provider and its fallbacks) and the capsule writer's chain share the endpoint construction
//! and the retry policy, so a change to either reaches both.

use std::sync::Arc;
use std::time::Duration;

use super::{
    EchoProvider, LlmError, OpenAiProvider, Provider, ProviderChain, RetryPolicy,
    UnconfiguredProvider,
};
use crate::config::{Config, Endpoint, ProviderKind};

fn retry_policy(config: &Config) -> RetryPolicy {
    RetryPolicy {
        max_retries: config.llm.max_retries,
        max_retry_after: Duration::from_secs(config.llm.max_retry_after_secs),
        ..RetryPolicy::default()
    }
}

fn endpoint(e: &Endpoint, timeout: Duration) -> Result<Arc<dyn Provider>, LlmError> {
    let base_url = e.base_url.as_ref().map_or("", |u| u.as_str());
    Ok(Arc::new(OpenAiProvider::new(
        base_url,
        e.api_key.clone(),
        &e.model,
        timeout,
    )?))
}

/// The main chain: `[llm]`'s provider, then `llm.fallbacks` in order.
pub fn main_chain(config: &Config) -> Result<ProviderChain, LlmError> {
    let timeout = Duration::from_secs(config.llm.timeout_secs);
    let mut providers: Vec<Arc<dyn Provider>> = Vec::new();
    match config.provider_kind() {
        ProviderKind::Openai => providers.push(endpoint(
            &Endpoint {
                base_url: config.llm.base_url.clone(),
                api_key: config.llm.api_key.clone(),
                model: config.llm.model.clone().unwrap_or_default(),
            },
            timeout,
        )?),
        ProviderKind::Echo => providers.push(Arc::new(EchoProvider)),
        ProviderKind::None | ProviderKind::Auto => providers.push(Arc::new(UnconfiguredProvider)),
    }
    for f in &config.llm.fallbacks {
        providers.push(endpoint(f, timeout)?);
    }
    Ok(ProviderChain::new(providers, retry_policy(config)))
}

/// The capsule writer's chain: `[[handoff.writer]]` endpoints when configured, else `main`.
pub fn writer_chain(config: &Config, main: &ProviderChain) -> Result<ProviderChain, LlmError> {
    if config.handoff.writer.is_empty() {
        return Ok(main.clone());
    }
    let timeout = Duration::from_secs(config.llm.timeout_secs);
    let providers = config
        .handoff
        .writer
        .iter()
        .map(|e| endpoint(e, timeout))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ProviderChain::new(providers, retry_policy(config)))
}
