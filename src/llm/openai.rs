//! The OpenAI-compatible chat-completions client (OpenAI, llama.cpp, vLLM, Ollama, …).
//!
//! Translates our request into the wire JSON and the answer back, classifying every failure
//! into an [`LlmError`]. It does not retry: that is the chain's job.

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde::Deserialize;
use serde_json::json;

use super::openai_wire::WireRequest;
use super::{ChatRequest, ChatResponse, DeltaSink, LlmError, Provider, Usage};
use crate::config::Secret;
use crate::domain::ToolCall;

pub struct OpenAiProvider {
    http: reqwest::Client,
    url: String,
    api_key: Option<Secret>,
    model: String,
}

impl OpenAiProvider {
    pub fn new(
        base_url: &str,
        api_key: Option<Secret>,
        model: &str,
        timeout: Duration,
    ) -> Result<OpenAiProvider, LlmError> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| LlmError::Transient(format!("cannot build HTTP client: {e}")))?;
        Ok(OpenAiProvider {
            http,
            url: format!("{}/chat/completions", base_url.trim_end_matches('/')),
            api_key,
            model: model.to_string(),
        })
    }

    fn body<'a>(&'a self, req: &'a ChatRequest) -> WireRequest<'a> {
        WireRequest::new(&self.model, req)
    }
}

#[async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> String {
        format!("openai:{}", self.model)
    }

    async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let resp = self.post(&self.body(req)).await?;
        let text = self.redacted(resp.text().await.map_err(classify_transport)?);
        parse_completion(&text)
    }

    async fn chat_stream(
        &self,
        req: &ChatRequest,
        sink: &dyn DeltaSink,
    ) -> Result<ChatResponse, LlmError> {
        let mut body = self.body(req);
        body.stream = true;
        body.stream_options = Some(json!({ "include_usage": true }));
        let resp = self.post(&body).await?;
        // An excerpt of a chunk may quote the key like any body: cut it out of the error too.
        super::openai_stream::read(resp, sink)
            .await
            .map_err(|e| match e {
                LlmError::BadResponse(m) => LlmError::BadResponse(self.redacted(m)),
                LlmError::Transient(m) => LlmError::Transient(self.redacted(m)),
                other => other,
            })
    }
}

impl OpenAiProvider {
    /// Posts a request body; a 2xx answer comes back unread, anything else as its error.
    async fn post(&self, body: &WireRequest<'_>) -> Result<reqwest::Response, LlmError> {
        let mut call = self.http.post(&self.url).json(body);
        if let Some(key) = &self.api_key {
            call = call.bearer_auth(key.expose());
        }
        let resp = call.send().await.map_err(classify_transport)?;
        let status = resp.status();
        if status.as_u16() == 429 {
            return Err(LlmError::RateLimited {
                retry_after: retry_after(resp.headers()),
            });
        }
        if status.is_success() {
            return Ok(resp);
        }
        let text = self.redacted(resp.text().await.map_err(classify_transport)?);
        if status.as_u16() == 408 {
            return Err(LlmError::Timeout);
        }
        if status.is_server_error() {
            return Err(LlmError::Transient(format!(
                "HTTP {status}: {}",
                excerpt(&text)
            )));
        }
        Err(LlmError::Rejected {
            status: status.as_u16(),
            message: excerpt(&text),
        })
    }

    /// Any excerpt of the body may reach the log and the inbox note, whatever the status: a
    /// provider quotes the key back in an error ("Incorrect API key provided: sk-…"), a proxy
    /// answers 200 with a page echoing the request headers. The key is cut out first (a plain
    /// search: a healthy answer does not contain it), and `excerpt` masks any other bearer
    /// credential.
    fn redacted(&self, text: String) -> String {
        without_key(text, self.api_key.as_ref())
    }
}

/// `text` with `key` cut out (a plain search: a healthy answer does not contain it).
pub(super) fn without_key(mut text: String, key: Option<&Secret>) -> String {
    if let Some(key) = key.filter(|k| !k.expose().is_empty()) {
        if text.contains(key.expose()) {
            text = text.replace(key.expose(), "***");
        }
    }
    text
}

pub(super) fn classify_transport(e: reqwest::Error) -> LlmError {
    if e.is_timeout() {
        LlmError::Timeout
    } else if e.is_decode() || e.is_body() {
        LlmError::BadResponse(e.to_string())
    } else {
        LlmError::Transient(e.to_string())
    }
}

/// `Retry-After` as seconds or an HTTP date.
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let wait = at.signed_duration_since(chrono::Utc::now());
    Some(wait.to_std().unwrap_or(Duration::ZERO))
}

/// The start of a provider's body for an error message, with bearer credentials masked.
pub(super) fn excerpt(s: &str) -> String {
    static BEARER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)(bearer\s+|api[_-]?key[\s\x22':=]+)[A-Za-z0-9._~+/=-]{6,}")
            .expect("static regex")
    });
    let head: String = s.chars().take(300).collect();
    BEARER.replace_all(&head, "${1}***").into_owned()
}

#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    model: String,
}

#[derive(Deserialize)]
struct Choice {
    message: WireMessage,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: String,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize, Default)]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    /// Anthropic-style cache writes, reported by some compatible gateways.
    #[serde(default)]
    cache_creation_input_tokens: u64,
}

impl WireUsage {
    pub(super) fn normalized(self) -> Usage {
        let cache_read = self
            .prompt_tokens_details
            .map(|d| d.cached_tokens)
            .unwrap_or(0);
        let cache_write = self.cache_creation_input_tokens;
        Usage {
            fresh_input: self.prompt_tokens.saturating_sub(cache_read + cache_write),
            output: self.completion_tokens,
            cache_read,
            cache_write,
        }
    }
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

pub(crate) fn parse_completion(text: &str) -> Result<ChatResponse, LlmError> {
    let c: Completion = serde_json::from_str(text)
        .map_err(|e| LlmError::BadResponse(format!("{e} in {:?}", excerpt(text))))?;
    let choice = c
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| LlmError::BadResponse("no choices in the answer".into()))?;
    let usage = c.usage.unwrap_or_default().normalized();
    let tool_calls: Vec<ToolCall> = choice
        .message
        .tool_calls
        .into_iter()
        .map(|t| ToolCall {
            id: t.id,
            name: t.function.name,
            arguments: t.function.arguments,
        })
        .collect();
    if choice.message.content.is_none() && tool_calls.is_empty() {
        return Err(LlmError::BadResponse(
            "the answer has neither text nor tool calls".into(),
        ));
    }
    Ok(ChatResponse {
        content: choice.message.content,
        tool_calls,
        usage,
        model: c.model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_normalized() {
        let r = parse_completion(
            r#"{"model":"m","choices":[{"message":{"role":"assistant","content":"hi"}}],
               "usage":{"prompt_tokens":100,"completion_tokens":7,
                        "prompt_tokens_details":{"cached_tokens":60}}}"#,
        )
        .unwrap();
        assert_eq!(r.content.as_deref(), Some("hi"));
        assert_eq!(
            r.usage,
            Usage {
                fresh_input: 40,
                output: 7,
                cache_read: 60,
                cache_write: 0
            }
        );
        assert_eq!(r.usage.prompt_total(), 100);
    }

    #[test]
    fn tool_calls_are_read() {
        let r = parse_completion(
            r#"{"choices":[{"message":{"content":null,"tool_calls":[
                {"id":"c1","type":"function","function":{"name":"session_search","arguments":"{\"query\":\"x\"}"}}]}}]}"#,
        )
        .unwrap();
        assert_eq!(r.tool_calls.len(), 1);
        assert_eq!(r.tool_calls[0].name, "session_search");
    }

    #[test]
    fn garbage_is_a_bad_response() {
        for body in [
            "<html>502</html>",
            "{}",
            r#"{"choices":[]}"#,
            r#"{"choices":[{"message":{}}]}"#,
        ] {
            assert!(
                matches!(parse_completion(body), Err(LlmError::BadResponse(_))),
                "{body}"
            );
        }
    }

    #[test]
    fn retry_after_forms() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert(RETRY_AFTER, "0.5".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(500)));
        h.insert(
            RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert(RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }
}
