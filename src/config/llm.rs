//! The `[llm]` section: the default agent's model — its provider, endpoint, key and model —
//! with the limits of one request and the fallbacks tried when it gives up. Each `[[agents]]`
//! table may replace the endpoint and model (`agents.rs`).

use serde::{Deserialize, Serialize};

use super::{ConfigUrl, Endpoint, ProviderKind, Secret};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// A preset (`openai`, `anthropic`, `openrouter`, …; see `providers.rs`), `auto`, `echo`
    /// or `none`. A preset fills the base URL and names the variable the key comes from.
    pub provider: ProviderKind,
    /// e.g. `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`. Falls back to
    /// the preset's variable (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`), then its default.
    pub base_url: Option<ConfigUrl>,
    /// Falls back to the preset's variable (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, …).
    pub api_key: Option<Secret>,
    /// Falls back to `OPENAI_MODEL` (`ANTHROPIC_MODEL` with the anthropic preset).
    pub model: Option<String>,
    /// Most tokens one answer may have (Anthropic's required `max_tokens`).
    pub max_tokens: u32,
    /// Per-request timeout.
    pub timeout_secs: u64,
    /// Retries of one provider on rate limits and transient errors before falling back.
    pub max_retries: u32,
    /// Longest wait honoured from a Retry-After header.
    pub max_retry_after_secs: u64,
    /// Context window in tokens; when unset, asked from the provider's model list.
    pub context_window: Option<u64>,
    /// Tried in order when the main provider gives up.
    pub fallbacks: Vec<Endpoint>,
    /// The model takes images: photos, image documents and tools' images are sent as image
    /// parts. Off: the model is told an image arrived that it cannot see.
    pub vision: bool,
    /// The variable that filled `api_key`, set by the loader (never read from the file).
    #[serde(skip)]
    pub api_key_from: Option<&'static str>,
}

impl Default for LlmConfig {
    fn default() -> Self {
        LlmConfig {
            provider: ProviderKind::Auto,
            base_url: None,
            api_key: None,
            model: None,
            max_tokens: 4096,
            timeout_secs: 120,
            max_retries: 3,
            max_retry_after_secs: 60,
            context_window: None,
            fallbacks: Vec::new(),
            vision: false,
            api_key_from: None,
        }
    }
}
