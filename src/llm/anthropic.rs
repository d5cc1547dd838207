//! The native Anthropic Messages API client (`POST {base_url}/v1/messages`).
//!
//! It exists because an OpenAI-compatible shim loses what matters most here: explicit cache
//! breakpoints (the plan in `anthropic_cache.rs`), usage that bills cache reads and writes
//! apart, and the provider's error meanings. It mirrors the OpenAI client: the key is cut out
//! of every excerpt, failures are classified into [`LlmError`], and it does not retry (the
//! chain does). 429 is a rate limit with its `retry-after`; 529 (overloaded) and other 5xx are
//! transient; 401/403 fail at once with one log line naming where the key came from (never the
//! key); a 400 "prompt is too long" is a context overflow.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::anthropic_cache::{self, CachePlan};
use super::anthropic_wire::wire_request;
use super::openai::{classify_transport, excerpt, retry_after};
use super::{ChatRequest, ChatResponse, DeltaSink, LlmError, Provider, Usage};
use crate::config::Secret;
use crate::domain::ToolCall;

/// The API version every request names.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

pub struct AnthropicProvider {
    http: reqwest::Client,
    url: String,
    api_key: Option<Secret>,
    /// Where the key came from (`llm.api_key`, `ANTHROPIC_API_KEY`, …), for the refusal line.
    key_source: String,
    model: String,
    max_tokens: u32,
    plan: CachePlan,
}

impl AnthropicProvider {
    /// `base_url` is the API root (`https://api.anthropic.com`; a trailing `/v1` is accepted).
    pub fn new(
        base_url: &str,
        api_key: Option<Secret>,
        key_source: impl Into<String>,
        model: &str,
        max_tokens: u32,
        timeout: Duration,
    ) -> Result<AnthropicProvider, LlmError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| LlmError::Transient(format!("cannot build HTTP client: {e}")))?;
        let root = base_url.trim_end_matches('/');
        let root = root.strip_suffix("/v1").unwrap_or(root);
        Ok(AnthropicProvider {
            http,
            url: format!("{root}/v1/messages"),
            api_key,
            key_source: key_source.into(),
            model: model.to_string(),
            max_tokens,
            plan: CachePlan::Full,
        })
    }

    /// Which cache breakpoints requests carry (always [`CachePlan::Full`] in the daemon; the
    /// others exist to measure the plan).
    pub fn with_cache_plan(mut self, plan: CachePlan) -> AnthropicProvider {
        self.plan = plan;
        self
    }

    /// The request body: the translation, then the cache plan on top of it.
    pub fn body(&self, req: &ChatRequest) -> Value {
        let mut w = wire_request(req);
        anthropic_cache::apply(self.plan, &mut w);
        let messages: Vec<Value> = w
            .messages
            .into_iter()
            .map(|m| json!({ "role": m.role, "content": m.content }))
            .collect();
        let mut body = json!({
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": messages,
        });
        if !w.system.is_empty() {
            body["system"] = Value::Array(w.system);
        }
        if !w.tools.is_empty() {
            body["tools"] = Value::Array(w.tools);
        }
        body
    }

    /// Posts a body; a 2xx answer comes back unread, anything else as its error.
    async fn post(&self, body: Value) -> Result<reqwest::Response, LlmError> {
        let mut call = self
            .http
            .post(&self.url)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .json(&body);
        if let Some(key) = &self.api_key {
            call = call.header("x-api-key", key.expose());
        }
        let resp = call.send().await.map_err(classify_transport)?;
        let status = resp.status().as_u16();
        if status == 429 {
            return Err(LlmError::RateLimited {
                retry_after: retry_after(resp.headers()),
            });
        }
        if resp.status().is_success() {
            return Ok(resp);
        }
        let text = self.redacted(resp.text().await.map_err(classify_transport)?);
        match status {
            408 => Err(LlmError::Timeout),
            401 | 403 => {
                tracing::error!(
                    provider = %self.name(),
                    status,
                    key_source = %self.key_source,
                    "Anthropic refused the API key from {}: check it (not retried)",
                    self.key_source
                );
                Err(LlmError::Rejected {
                    status,
                    message: excerpt(&text),
                })
            }
            529 => Err(LlmError::Transient(format!(
                "HTTP 529 overloaded: {}",
                excerpt(&text)
            ))),
            s if s >= 500 => Err(LlmError::Transient(format!("HTTP {s}: {}", excerpt(&text)))),
            _ => Err(LlmError::Rejected {
                status,
                message: excerpt(&text),
            }),
        }
    }

    /// The key cut out of any text that may reach a log or a row (see the OpenAI client).
    fn redacted(&self, text: String) -> String {
        super::openai::without_key(text, self.api_key.as_ref())
    }
}

#[async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> String {
        format!("anthropic:{}", self.model)
    }

    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let resp = self.post(self.body(req)).await?;
        let text = self.redacted(resp.text().await.map_err(classify_transport)?);
        parse_message(&text)
    }

    async fn chat_stream(
        &self,
        req: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, LlmError> {
        let mut body = self.body(req);
        body["stream"] = json!(true);
        let resp = self.post(body).await?;
        super::anthropic_stream::read(resp, sink)
            .await
            .map_err(|e| match e {
                LlmError::BadResponse(m) => LlmError::BadResponse(self.redacted(m)),
                LlmError::Transient(m) => LlmError::Transient(self.redacted(m)),
                other => other,
            })
    }
}

/// Anthropic's usage: `input_tokens` already excludes the cache reads and writes, so the four
/// fields map onto our four disjoint buckets as they are.
#[derive(Deserialize, Default, Debug, Clone, Copy)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    pub(super) fn normalized(self) -> Usage {
        Usage {
            fresh_input: self.input_tokens.unwrap_or(0),
            output: self.output_tokens.unwrap_or(0),
            cache_read: self.cache_read_input_tokens.unwrap_or(0),
            cache_write: self.cache_creation_input_tokens.unwrap_or(0),
        }
    }

    /// A later report (the stream's `message_delta`) overrides the fields it carries.
    pub(super) fn update(&mut self, later: WireUsage) {
        let take = |a: &mut Option<u64>, b: Option<u64>| {
            if b.is_some() {
                *a = b;
            }
        };
        take(&mut self.input_tokens, later.input_tokens);
        take(&mut self.output_tokens, later.output_tokens);
        take(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
        take(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
    }
}

#[derive(Deserialize)]
struct Message {
    #[serde(rename = "type")]
    kind: String,
    content: Vec<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    model: String,
}

/// A tool call from a `tool_use` block (its `input` object kept as JSON text).
pub(super) fn tool_call(block: &Value) -> Option<ToolCall> {
    Some(ToolCall {
        id: block["id"].as_str()?.to_string(),
        name: block["name"].as_str()?.to_string(),
        arguments: block.get("input").map_or("{}".into(), Value::to_string),
    })
}

/// A whole (non-streamed) answer. Thinking blocks are dropped: never stored, never replayed.
pub(crate) fn parse_message(text: &str) -> Result<ChatResponse, LlmError> {
    let m: Message = serde_json::from_str(text)
        .map_err(|e| LlmError::BadResponse(format!("{e} in {:?}", excerpt(text))))?;
    if m.kind != "message" {
        return Err(LlmError::BadResponse(format!(
            "expected a message, got {:?}",
            m.kind
        )));
    }
    let mut content: Option<String> = None;
    let mut tool_calls = Vec::new();
    for block in &m.content {
        match block["type"].as_str() {
            Some("text") => content
                .get_or_insert_with(String::new)
                .push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => tool_calls.push(tool_call(block).ok_or_else(|| {
                LlmError::BadResponse("a tool_use block without an id or name".into())
            })?),
            _ => {}
        }
    }
    if content.is_none() && tool_calls.is_empty() {
        return Err(LlmError::BadResponse(
            "the answer has neither text nor tool calls".into(),
        ));
    }
    Ok(ChatResponse {
        content,
        tool_calls,
        usage: m.usage.unwrap_or_default().normalized(),
        model: m.model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_disjoint_and_thinking_is_dropped() {
        let r = parse_message(
            r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x",
               "content":[{"type":"thinking","thinking":"secret plan","signature":"s"},
                          {"type":"text","text":"Hi"},
                          {"type":"tool_use","id":"tu_1","name":"clock","input":{"tz":"UTC"}}],
               "stop_reason":"tool_use",
               "usage":{"input_tokens":12,"output_tokens":5,
                        "cache_creation_input_tokens":300,"cache_read_input_tokens":2000}}"#,
        )
        .unwrap();
        assert_eq!(r.content.as_deref(), Some("Hi"));
        assert_eq!(r.tool_calls[0].arguments, r#"{"tz":"UTC"}"#);
        assert_eq!(
            r.usage,
            Usage {
                fresh_input: 12,
                output: 5,
                cache_read: 2000,
                cache_write: 300
            }
        );
        assert_eq!(r.usage.prompt_total(), 2312);
    }

    #[test]
    fn garbage_is_a_bad_response() {
        for body in [
            "<html>",
            r#"{"type":"error","content":[]}"#,
            r#"{"type":"message","content":[]}"#,
        ] {
            assert!(
                matches!(parse_message(body), Err(LlmError::BadResponse(_))),
                "{body}"
            );
        }
    }

    #[test]
    fn the_body_sets_max_tokens_and_the_plan() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let p = AnthropicProvider::new(
            "http://127.0.0.1:9/v1/",
            None,
            "llm.api_key",
            "m",
            1234,
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(p.url, "http://127.0.0.1:9/v1/messages");
        let req = ChatRequest {
            messages: vec![
                super::super::ChatMessage::new(crate::domain::Role::System, "sys"),
                super::super::ChatMessage::new(crate::domain::Role::User, "hi"),
            ],
            tools: Vec::new(),
        };
        let b = p.body(&req);
        assert_eq!(b["max_tokens"], 1234);
        assert_eq!(b["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(
            b["messages"][0]["content"][0]["cache_control"]["type"],
            "ephemeral"
        );
        assert!(b.get("tools").is_none());
        let b = p.with_cache_plan(CachePlan::Off).body(&req);
        assert!(!b.to_string().contains("cache_control"));
    }
}
