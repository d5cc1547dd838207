//! The model's context window: from `[llm] context_window`, else the provider preset's fixed
//! size (Anthropic: 200k), else from the provider's model list (`GET {base_url}/models`), else
//! 32k.
//!
//! The list is asked once per (endpoint, model) per process and the answer, or the default
//! after a failure, is cached: a turn must never wait on it twice. It must not guess from the
//! model name.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;

use crate::config::{LlmConfig, WindowSource};

pub const DEFAULT_WINDOW: usize = 32_768;
const LIST_TIMEOUT: Duration = Duration::from_secs(5);
/// Fields providers use for the window: OpenRouter / llama.cpp style, vLLM, LiteLLM
/// (`max_input_tokens`, also inside its `model_info`), others.
const WINDOW_FIELDS: [&str; 5] = [
    "context_length",
    "max_input_tokens",
    "max_model_len",
    "context_window",
    "max_context_length",
];

fn cache() -> &'static Mutex<HashMap<String, usize>> {
    static CACHE: OnceLock<Mutex<HashMap<String, usize>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The window in tokens for the configured primary model.
pub async fn context_window(llm: &LlmConfig) -> usize {
    if let Some(w) = llm.context_window.filter(|w| *w > 0) {
        return w as usize;
    }
    // A provider whose models all share one window (Anthropic) needs no model list. Any other
    // is asked: an OpenAI-compatible server behind `provider = "openai"` may well say.
    if let Some(WindowSource::Fixed(w)) = llm.provider.preset().map(|p| p.window) {
        return w as usize;
    }
    let (Some(base), Some(model)) = (
        llm.base_url.as_ref().map(|u| u.as_str()),
        llm.model.as_deref(),
    ) else {
        return DEFAULT_WINDOW;
    };
    let key = format!("{base}\n{model}");
    if let Some(w) = cache().lock().ok().and_then(|c| c.get(&key).copied()) {
        return w;
    }
    let found = fetch(base, llm.api_key.as_ref().map(|k| k.expose()), model).await;
    let w = found.unwrap_or(DEFAULT_WINDOW);
    if found.is_none() {
        tracing::info!(
            window = w,
            "the model list gave no context window; using the default (set llm.context_window)"
        );
    }
    if let Ok(mut c) = cache().lock() {
        c.insert(key, w);
    }
    w
}

async fn fetch(base: &str, key: Option<&str>, model: &str) -> Option<usize> {
    let http = reqwest::Client::builder()
        .timeout(LIST_TIMEOUT)
        .build()
        .ok()?;
    let mut req = http.get(format!("{}/models", base.trim_end_matches('/')));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let body: Value = req
        .send()
        .await
        .ok()?
        .error_for_status()
        .ok()?
        .json()
        .await
        .ok()?;
    window_from_list(&body, model)
}

/// The window of `model` in an OpenAI-style list (`{"data": [...]}`), or of its only entry.
pub fn window_from_list(body: &Value, model: &str) -> Option<usize> {
    let entries = body["data"].as_array()?;
    let entry = entries
        .iter()
        .find(|e| e["id"].as_str() == Some(model))
        .or(if entries.len() == 1 {
            entries.first()
        } else {
            None
        })?;
    WINDOW_FIELDS
        .iter()
        .find_map(|f| entry[*f].as_u64().or(entry["model_info"][*f].as_u64()))
        .filter(|w| *w > 0)
        .map(|w| w as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn window_fields_from_model_lists() {
        let table = [
            (
                json!({"data": [{"id": "m", "context_length": 32768}]}),
                Some(32_768),
            ),
            (
                json!({"data": [{"id": "m", "max_model_len": 8192}]}),
                Some(8_192),
            ),
            (
                json!({"data": [{"id": "m", "max_input_tokens": 200000, "max_tokens": 8192}]}),
                Some(200_000),
            ),
            (
                json!({"data": [{"id": "m", "model_info": {"max_input_tokens": 128000}}]}),
                Some(128_000),
            ),
            (
                json!({"data": [{"id": "x", "context_length": 1}, {"id": "m", "context_window": 4096}]}),
                Some(4_096),
            ),
            (
                json!({"data": [{"id": "other", "context_length": 999}]}),
                Some(999),
            ),
            (
                json!({"data": [{"id": "a", "context_length": 1}, {"id": "b", "context_length": 2}]}),
                None,
            ),
            (json!({"data": [{"id": "m"}]}), None),
            (json!({"object": "error"}), None),
        ];
        for (body, want) in table {
            assert_eq!(window_from_list(&body, "m"), want, "{body}");
        }
    }

    #[tokio::test]
    async fn an_anthropic_model_has_its_window_without_a_model_list() {
        use crate::config::{ConfigUrl, ProviderKind};
        let mut llm = LlmConfig {
            provider: ProviderKind::Anthropic,
            model: Some("claude-x".into()),
            // Nothing listens here: asking the model list would fall back to 32k.
            base_url: Some(ConfigUrl::parse("http://127.0.0.1:9/v1").unwrap()),
            ..LlmConfig::default()
        };
        assert_eq!(context_window(&llm).await, 200_000);
        llm.context_window = Some(50_000);
        assert_eq!(
            context_window(&llm).await,
            50_000,
            "the operator's value wins"
        );
    }
}
