//! Model providers: the OpenAI-compatible client, the native Anthropic client (with its cache
//! plan), the demo providers, and the retry and fallback chain around them.
//!
//! Errors are classified by what the agent loop does next ([`LlmError::is_retryable`]): wait
//! and retry (rate limits, timeouts, 5xx), move to the next provider, or give up with a clear
//! line to the user. Usage is normalized into fresh input / output / cache read / cache write.

mod anthropic;
mod anthropic_cache;
mod anthropic_stream;
mod anthropic_wire;
mod build;
mod chain;
mod content;
mod echo;
mod openai;
mod openai_stream;
mod openai_wire;
mod stream;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::domain::{Role, ToolCall};

pub use anthropic::{AnthropicProvider, ANTHROPIC_VERSION};
pub use anthropic_cache::CachePlan;
pub use build::{judge_chain, main_chain, writer_chain};
pub use chain::{ProviderChain, RetryPolicy};
pub use content::{Blob, Part, IMAGE_TOKENS};
pub use echo::{EchoProvider, UnconfiguredProvider, NOT_CONFIGURED_REPLY};
pub use openai::OpenAiProvider;
pub use stream::{DeltaSink, NoSink};

/// One message as the provider sees it: its text, then its other parts in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    /// The text part (first when there are others).
    pub content: Option<String>,
    /// Images and audio after the text (a person's photo, a tool's image).
    pub parts: Vec<Part>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    pub fn new(role: Role, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role,
            content: Some(content.into()),
            parts: Vec::new(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// An assistant message that asks for tools.
    pub fn tool_calls(content: Option<String>, calls: Vec<ToolCall>) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            content,
            parts: Vec::new(),
            tool_calls: calls,
            tool_call_id: None,
        }
    }

    /// The result of the call `call_id`.
    pub fn tool_result(call_id: &str, content: impl Into<String>) -> ChatMessage {
        let mut m = ChatMessage::new(Role::Tool, content);
        m.tool_call_id = Some(call_id.to_string());
        m
    }
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
}

#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
}

/// Token usage, normalized across providers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens neither read from nor written to a cache.
    pub fresh_input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Usage {
    /// Everything the provider billed as prompt.
    pub fn prompt_total(&self) -> u64 {
        self.fresh_input + self.cache_read + self.cache_write
    }

    pub fn add(&mut self, other: Usage) {
        self.fresh_input += other.fresh_input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
    }
}

#[derive(Debug, Clone, Default)]
pub struct ChatResponse {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub model: String,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    #[error("rate limited by the model provider")]
    RateLimited { retry_after: Option<Duration> },
    #[error("the model did not answer in time")]
    Timeout,
    /// 5xx, connection refused or reset: likely to pass.
    #[error("model provider unavailable: {0}")]
    Transient(String),
    /// 4xx other than 429: retrying the same request cannot help.
    #[error("model provider refused the request ({status}): {message}")]
    Rejected { status: u16, message: String },
    /// The answer was not a chat completion (garbage, truncated JSON, no choices).
    #[error("model answered something that is not a chat completion: {0}")]
    BadResponse(String),
    #[error("no model is configured")]
    NotConfigured,
    /// A spending cap (or an unpriced model with caps on) refused the call before it was
    /// sent; the text is the one line the person sees.
    #[error("refused by the budget: {0}")]
    OverBudget(String),
}

impl LlmError {
    /// Whether waiting and sending the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. }
                | LlmError::Timeout
                | LlmError::Transient(_)
                | LlmError::BadResponse(_)
        )
    }

    /// A 400/413 whose body is the provider saying the request does not fit the model's
    /// context window: the one rejection that compacting the conversation can cure.
    pub fn is_context_overflow(&self) -> bool {
        let LlmError::Rejected { status, message } = self else {
            return false;
        };
        if !matches!(status, 400 | 413) {
            return false;
        }
        let m = message.to_ascii_lowercase();
        [
            "context_length_exceeded",
            "maximum context length",
            "context window",
            "context length",
            "prompt is too long",
            "too many tokens",
            "input is too long",
            "reduce the length of the messages",
        ]
        .iter()
        .any(|p| m.contains(p))
    }

    /// Short label for logs and metrics.
    pub fn class(&self) -> &'static str {
        if self.is_context_overflow() {
            return "context_overflow";
        }
        match self {
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::Timeout => "timeout",
            LlmError::Transient(_) => "transient",
            LlmError::Rejected { .. } => "rejected",
            LlmError::BadResponse(_) => "bad_response",
            LlmError::NotConfigured => "not_configured",
            LlmError::OverBudget(_) => "over_budget",
        }
    }

    /// The one line a chat user sees when the turn gives up.
    pub fn user_message(&self) -> String {
        match self {
            LlmError::RateLimited { .. } => {
                "The model is rate-limiting me right now; please try again in a minute.".into()
            }
            LlmError::Timeout => {
                "The model did not answer in time; please try again (your message was kept)."
                    .into()
            }
            LlmError::Transient(_) | LlmError::BadResponse(_) => {
                "The model is unavailable right now; please try again shortly (your message was kept)."
                    .into()
            }
            e @ LlmError::Rejected { .. } if e.is_context_overflow() => {
                "This conversation no longer fits the model's context window, even after \
                 compacting it. Send /new to start a fresh session (earlier messages stay \
                 searchable)."
                    .into()
            }
            LlmError::Rejected { status, .. } => format!(
                "The model provider refused the request (HTTP {status}); the operator needs to check the model settings."
            ),
            LlmError::NotConfigured => NOT_CONFIGURED_REPLY.into(),
            LlmError::OverBudget(line) => line.clone(),
        }
    }
}

/// Hears every model call before it is sent and after it ends: where the budget reserves a
/// call's worst case and settles it to what was billed. One meter serves one turn (or one
/// capsule), so it knows whom the spending belongs to; a child agent's calls use its parent's.
#[async_trait]
pub trait Meter: Send + Sync {
    /// Before `model` is asked `req`. An error refuses the call: it is not sent, not retried,
    /// and no fallback is tried.
    async fn reserve(&self, model: &str, req: &ChatRequest) -> Result<Hold, LlmError>;
    /// After the call: `Some(usage)` when the provider answered (its bill), `None` when it
    /// failed (the hold is released).
    async fn settle(&self, hold: Hold, model: &str, usage: Option<Usage>);
    /// The meter of a child agent of this turn: the same payer and caps, its calls marked as
    /// a child's. `None`: the child uses this meter.
    fn child(&self) -> Option<Box<dyn Meter>> {
        None
    }
}

/// A reservation made by a [`Meter`], handed back to it when the call ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hold(pub i64);

/// How one call is made: streamed to a sink, metered, both or neither.
#[derive(Clone, Copy, Default)]
pub struct CallOpts<'a> {
    pub sink: Option<&'a dyn DeltaSink>,
    pub meter: Option<&'a dyn Meter>,
}

#[async_trait]
pub trait Provider: Send + Sync {
    /// Name for logs and metrics (`openai:<model>`, `anthropic:<model>`, `echo`).
    fn name(&self) -> String;
    /// The model id the provider asks for (what prices are matched against).
    fn model(&self) -> String {
        let name = self.name();
        match name.split_once(':') {
            Some((_, model)) => model.to_string(),
            None => name,
        }
    }
    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError>;

    /// The same answer as [`Provider::chat`], its text shown to `sink` as it is written.
    /// The default (providers that cannot stream) shows the whole text once, at the end.
    async fn chat_stream(
        &self,
        req: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, LlmError> {
        let resp = self.chat(req).await?;
        if let Some(text) = resp.content.as_deref().filter(|t| !t.is_empty()) {
            sink.text(text);
        }
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::LlmError;

    #[test]
    fn context_overflow_is_told_apart_from_other_rejections() {
        let rejected = |status, message: &str| LlmError::Rejected {
            status,
            message: message.into(),
        };
        for (status, body, overflow) in [
            (
                400,
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","code":"context_length_exceeded"}}"#,
                true,
            ),
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
                true,
            ),
            (413, "Request too large: too many tokens", true),
            (
                400,
                r#"{"error":{"message":"Invalid value for 'temperature'"}}"#,
                false,
            ),
            (401, "maximum context length", false),
        ] {
            let e = rejected(status, body);
            assert_eq!(e.is_context_overflow(), overflow, "{status} {body}");
            assert_eq!(e.class() == "context_overflow", overflow);
            assert_eq!(e.user_message().contains("/new"), overflow);
        }
        assert!(!LlmError::Timeout.is_context_overflow());
    }
}
