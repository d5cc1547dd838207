//! Providers that need no model: `echo` for demos and tests, and the "not configured" answer
//! that keeps a fresh install talking instead of crashing or hanging.

use async_trait::async_trait;

use super::{ChatRequest, ChatResponse, LlmError, Provider};
use crate::domain::Role;

/// A key is optional (llama.cpp, Ollama and vLLM usually need none), so it is not listed as
/// required; `herald doctor` shows where each model key came from.
pub const NOT_CONFIGURED_REPLY: &str =
    "No model is configured yet. Set OPENAI_BASE_URL and OPENAI_MODEL (or llm.base_url and \
     llm.model in the config file), plus OPENAI_API_KEY if the endpoint needs a key, then \
     restart herald. `herald doctor` shows what it found. For a demo without a model, start \
     herald with HERALD_LLM__PROVIDER=echo (it repeats what you write).";

/// Repeats the last user message. Named as what it is: never a production provider.
pub struct EchoProvider;

#[async_trait]
impl Provider for EchoProvider {
    fn name(&self) -> String {
        "echo".into()
    }

    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let last = req
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.content.clone())
            .unwrap_or_default();
        Ok(ChatResponse {
            content: Some(format!("echo: {last}")),
            model: "echo".into(),
            ..ChatResponse::default()
        })
    }
}

/// Fails every call with [`LlmError::NotConfigured`]; the turn turns that into one clear line.
pub struct UnconfiguredProvider;

#[async_trait]
impl Provider for UnconfiguredProvider {
    fn name(&self) -> String {
        "none".into()
    }

    async fn chat(&self, _req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        Err(LlmError::NotConfigured)
    }
}
