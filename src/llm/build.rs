//! Building provider chains from configuration, in one place: the main chain (the configured
//! provider and its fallbacks) and the capsule writer's chain share the endpoint construction
//! and the retry policy, so a change to either reaches both. Each endpoint gets the client of
//! its transport (OpenAI-compatible or Anthropic), so a chain may mix them.

use std::sync::Arc;
use std::time::Duration;

use super::{
    AnthropicProvider, EchoProvider, LlmError, OpenAiProvider, Provider, ProviderChain,
    RetryPolicy, UnconfiguredProvider,
};
use crate::config::{Config, Endpoint, Transport};

fn retry_policy(config: &Config) -> RetryPolicy {
    RetryPolicy {
        max_retries: config.llm.max_retries,
        max_retry_after: Duration::from_secs(config.llm.max_retry_after_secs),
        ..RetryPolicy::default()
    }
}

/// One endpoint's client; `key_key` is the config key its `api_key` sits under.
fn endpoint(config: &Config, e: &Endpoint, key_key: &str) -> Result<Arc<dyn Provider>, LlmError> {
    let timeout = Duration::from_secs(config.llm.timeout_secs);
    let base_url = e.base_url.as_ref().map_or("", |u| u.as_str());
    Ok(match e.transport() {
        Transport::Anthropic => {
            let source = match (&e.api_key, e.api_key_from) {
                (None, _) => format!("nowhere ({key_key} and ANTHROPIC_API_KEY are unset)"),
                (Some(_), Some(var)) => var.to_string(),
                (Some(_), None) => key_key.to_string(),
            };
            Arc::new(AnthropicProvider::new(
                base_url,
                e.api_key.clone(),
                source,
                &e.model,
                config.llm.max_tokens,
                timeout,
            )?)
        }
        _ => Arc::new(OpenAiProvider::new(
            base_url,
            e.api_key.clone(),
            &e.model,
            timeout,
        )?),
    })
}

/// The judge of `herald eval`: `[[eval.judge]]` in order, or the main chain when there is none.
pub fn judge_chain(config: &Config) -> Result<ProviderChain, LlmError> {
    if config.eval.judge.is_empty() {
        return main_chain(config);
    }
    let providers = config
        .eval
        .judge
        .iter()
        .enumerate()
        .map(|(i, e)| endpoint(config, e, &format!("eval.judge[{i}].api_key")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ProviderChain::new(providers, retry_policy(config)))
}

/// The main chain: `[llm]`'s provider, then `llm.fallbacks` in order.
pub fn main_chain(config: &Config) -> Result<ProviderChain, LlmError> {
    let mut providers: Vec<Arc<dyn Provider>> = Vec::new();
    match config.transport() {
        Transport::OpenAi | Transport::Anthropic => {
            let main = Endpoint {
                provider: Some(config.provider_kind()),
                base_url: config.llm.base_url.clone(),
                api_key: config.llm.api_key.clone(),
                model: config.llm.model.clone().unwrap_or_default(),
                api_key_from: config.llm.api_key_from,
            };
            providers.push(endpoint(config, &main, "llm.api_key")?);
        }
        Transport::Echo => providers.push(Arc::new(EchoProvider)),
        Transport::None => providers.push(Arc::new(UnconfiguredProvider)),
    }
    for (i, f) in config.llm.fallbacks.iter().enumerate() {
        providers.push(endpoint(config, f, &format!("llm.fallbacks[{i}].api_key"))?);
    }
    Ok(ProviderChain::new(providers, retry_policy(config)))
}

/// The capsule writer's chain: `[[handoff.writer]]` endpoints when configured, else `main`.
pub fn writer_chain(config: &Config, main: &ProviderChain) -> Result<ProviderChain, LlmError> {
    if config.handoff.writer.is_empty() {
        return Ok(main.clone());
    }
    let providers = config
        .handoff
        .writer
        .iter()
        .enumerate()
        .map(|(i, e)| endpoint(config, e, &format!("handoff.writer[{i}].api_key")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ProviderChain::new(providers, retry_policy(config)))
}
