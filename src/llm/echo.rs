//! Providers that need no model: `echo` for demos and tests, and the "not configured" answer
//! that keeps a fresh install talking instead of crashing or hanging.

use async_trait::async_trait;

use super::{ChatRequest, ChatResponse, LlmError, Provider};
use crate::domain::Role;

pub const NOT_CONFIGURED_REPLY: &str =
    "No model is configured yet. Set OPENAI_BASE_URL (or HERALD_LLM__BASE_URL), \
     OPENAI_API_KEY and HERALD_LLM__MODEL (or OPENAI_MODEL), then restart herald.";

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
