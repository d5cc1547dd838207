//! Providers as data: the named presets `[llm] provider = "…"` (and `provider` in a fallback or
//! handoff writer entry) may take, each a base URL, the variable its key conventionally lives
//! in, its transport, and where its context window comes from.
//!
//! They exist so a newcomer names a provider instead of copying URLs. A preset only fills keys
//! left unset; no preset has code of its own beyond the two transports (OpenAI-compatible chat
//! completions and Anthropic's Messages API).

use serde::{Deserialize, Serialize};

use super::{ConfigUrl, Secret};

/// What `provider` names: a preset, or one of the special values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible when a base URL or model is configured, otherwise `none`.
    Auto,
    Openai,
    Anthropic,
    Openrouter,
    Groq,
    Together,
    Deepseek,
    Mistral,
    Ollama,
    Vllm,
    Lmstudio,
    Llamacpp,
    Litellm,
    /// Answers with the user's own text: for demos and tests, never for production.
    Echo,
    /// No model: every turn answers with one line saying how to configure one.
    None,
}

/// The two wire formats Herald speaks, and the two providers that need no wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `POST {base_url}/chat/completions`, bearer key.
    OpenAi,
    /// `POST {base_url}/v1/messages`, `x-api-key`, explicit cache breakpoints.
    Anthropic,
    Echo,
    None,
}

impl Transport {
    /// How doctor names it.
    pub fn label(self) -> &'static str {
        match self {
            Transport::OpenAi => "OpenAI-compatible",
            Transport::Anthropic => "Anthropic Messages",
            Transport::Echo => "echo",
            Transport::None => "no",
        }
    }
}

/// Where the context window of a preset's model comes from when `llm.context_window` is unset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    /// The provider's `GET {base_url}/models` entry for the model.
    ModelList,
    /// A fixed size (every current model of the provider has it).
    Fixed(u64),
    /// Neither: set `llm.context_window` (else 32k is assumed).
    Config,
}

/// One named provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    pub kind: ProviderKind,
    pub name: &'static str,
    pub base_url: &'static str,
    /// The variable that fills an unset `api_key` (`None`: a local server without a key).
    pub key_env: Option<&'static str>,
    /// The variable that fills an unset `base_url`, when the provider has a convention.
    pub base_url_env: Option<&'static str>,
    /// The variable that fills an unset `llm.model`.
    pub model_env: Option<&'static str>,
    pub transport: Transport,
    pub window: WindowSource,
}

const fn compat(
    kind: ProviderKind,
    name: &'static str,
    base_url: &'static str,
    key_env: Option<&'static str>,
    window: WindowSource,
) -> Preset {
    Preset {
        kind,
        name,
        base_url,
        key_env,
        base_url_env: None,
        model_env: None,
        transport: Transport::OpenAi,
        window,
    }
}

/// Every preset, in the order `docs/configuration.md` lists them.
pub const PRESETS: &[Preset] = &[
    Preset {
        base_url_env: Some("OPENAI_BASE_URL"),
        model_env: Some("OPENAI_MODEL"),
        ..compat(
            ProviderKind::Openai,
            "openai",
            "https://api.openai.com/v1",
            Some("OPENAI_API_KEY"),
            WindowSource::Config,
        )
    },
    Preset {
        kind: ProviderKind::Anthropic,
        name: "anthropic",
        base_url: "https://api.anthropic.com",
        key_env: Some("ANTHROPIC_API_KEY"),
        base_url_env: Some("ANTHROPIC_BASE_URL"),
        model_env: Some("ANTHROPIC_MODEL"),
        transport: Transport::Anthropic,
        window: WindowSource::Fixed(200_000),
    },
    compat(
        ProviderKind::Openrouter,
        "openrouter",
        "https://openrouter.ai/api/v1",
        Some("OPENROUTER_API_KEY"),
        WindowSource::ModelList,
    ),
    compat(
        ProviderKind::Groq,
        "groq",
        "https://api.groq.com/openai/v1",
        Some("GROQ_API_KEY"),
        WindowSource::ModelList,
    ),
    compat(
        ProviderKind::Together,
        "together",
        "https://api.together.xyz/v1",
        Some("TOGETHER_API_KEY"),
        WindowSource::ModelList,
    ),
    compat(
        ProviderKind::Deepseek,
        "deepseek",
        "https://api.deepseek.com/v1",
        Some("DEEPSEEK_API_KEY"),
        WindowSource::Config,
    ),
    compat(
        ProviderKind::Mistral,
        "mistral",
        "https://api.mistral.ai/v1",
        Some("MISTRAL_API_KEY"),
        WindowSource::ModelList,
    ),
    compat(
        ProviderKind::Ollama,
        "ollama",
        "http://127.0.0.1:11434/v1",
        None,
        WindowSource::Config,
    ),
    compat(
        ProviderKind::Vllm,
        "vllm",
        "http://127.0.0.1:8000/v1",
        Some("VLLM_API_KEY"),
        WindowSource::ModelList,
    ),
    compat(
        ProviderKind::Lmstudio,
        "lmstudio",
        "http://127.0.0.1:1234/v1",
        None,
        WindowSource::Config,
    ),
    compat(
        ProviderKind::Llamacpp,
        "llamacpp",
        "http://127.0.0.1:8080/v1",
        None,
        WindowSource::ModelList,
    ),
    compat(
        ProviderKind::Litellm,
        "litellm",
        "http://127.0.0.1:4000/v1",
        Some("LITELLM_API_KEY"),
        WindowSource::ModelList,
    ),
];

impl ProviderKind {
    /// The preset this name stands for (`None` for auto, echo and none).
    pub fn preset(self) -> Option<&'static Preset> {
        PRESETS.iter().find(|p| p.kind == self)
    }

    pub fn transport(self) -> Transport {
        match self {
            ProviderKind::Echo => Transport::Echo,
            ProviderKind::None | ProviderKind::Auto => Transport::None,
            k => k.preset().map_or(Transport::OpenAi, |p| p.transport),
        }
    }

    /// The variable that fills an unset key: the preset's, and `OPENAI_API_KEY` for `auto`.
    pub fn key_env(self) -> Option<&'static str> {
        match self {
            ProviderKind::Auto | ProviderKind::None => Some("OPENAI_API_KEY"),
            k => k.preset().and_then(|p| p.key_env),
        }
    }
}

/// One model endpoint: a fallback or a handoff writer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Endpoint {
    /// A preset name; unset: an OpenAI-compatible endpoint at `base_url`.
    pub provider: Option<ProviderKind>,
    /// Required in a list entry unless `provider` names a preset.
    pub base_url: Option<ConfigUrl>,
    pub api_key: Option<Secret>,
    pub model: String,
    /// Where `api_key` came from when a variable filled it (set by the loader, never read
    /// from the file): named in the log line of a refused key.
    #[serde(skip)]
    pub api_key_from: Option<&'static str>,
}

impl Endpoint {
    pub fn transport(&self) -> Transport {
        self.provider
            .map_or(Transport::OpenAi, ProviderKind::transport)
    }
}

/// Fills an endpoint's unset base URL from its preset, and (with `get`) its unset key from the
/// preset's variable.
/// Reads one environment variable (the real environment, or a test's table).
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

pub(crate) fn fill_endpoint(e: &mut Endpoint, get: Option<EnvLookup<'_>>) {
    let Some(preset) = e.provider.and_then(ProviderKind::preset) else {
        return;
    };
    if e.api_key.is_none() {
        if let (Some(var), Some(get)) = (preset.key_env, get) {
            if let Some(v) = get(var).filter(|v| !v.trim().is_empty()) {
                e.api_key = Some(Secret::new(v));
                e.api_key_from = Some(var);
            }
        }
    }
    if e.base_url.is_none() {
        e.base_url = ConfigUrl::parse(preset.base_url).ok();
    }
}

/// Fills every preset's unset base URL (`[llm]`, fallbacks, writers). Runs after the
/// environment, so `ANTHROPIC_BASE_URL` and friends win over a preset's default.
pub(crate) fn apply_presets(config: &mut super::Config) {
    if let Some(p) = config.llm.provider.preset() {
        if config.llm.base_url.is_none() {
            config.llm.base_url = ConfigUrl::parse(p.base_url).ok();
        }
    }
    for e in config
        .llm
        .fallbacks
        .iter_mut()
        .chain(config.handoff.writer.iter_mut())
        .chain(config.eval.judge.iter_mut())
    {
        fill_endpoint(e, None);
    }
    super::agents::fill_agents(config, None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_listed_once_with_a_parsable_url() {
        for p in PRESETS {
            assert!(ConfigUrl::parse(p.base_url).is_ok(), "{}", p.name);
            assert_eq!(PRESETS.iter().filter(|q| q.kind == p.kind).count(), 1);
            let named: ProviderKind = serde_json::from_value(serde_json::json!(p.name)).unwrap();
            assert_eq!(named, p.kind);
        }
        assert_eq!(ProviderKind::Anthropic.transport(), Transport::Anthropic);
        assert_eq!(ProviderKind::Groq.transport(), Transport::OpenAi);
        assert_eq!(ProviderKind::Auto.transport(), Transport::None);
    }

    #[test]
    fn a_preset_fills_what_is_unset_from_its_own_variables() {
        use crate::config::load::apply_conventional_env;
        let toml = "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-x\"\n\
                    [[llm.fallbacks]]\nprovider = \"openrouter\"\nmodel = \"m\"\n\
                    [[handoff.writer]]\nprovider = \"anthropic\"\nmodel = \"w\"\n\
                    api_key = \"sk-file\"";
        let mut c: crate::config::Config = figment::Figment::from(
            figment::providers::Serialized::defaults(crate::config::Config::default()),
        )
        .merge(<figment::providers::Toml as figment::providers::Format>::string(toml))
        .extract()
        .unwrap();
        apply_conventional_env(&mut c, |k| match k {
            "ANTHROPIC_API_KEY" => Some("sk-ant-env".into()),
            "OPENAI_API_KEY" => Some("sk-openai-must-not-be-used".into()),
            "OPENROUTER_API_KEY" => Some("sk-or".into()),
            "ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:9".into()),
            _ => None,
        })
        .unwrap();
        apply_presets(&mut c);
        crate::config::validate(&c).unwrap();
        assert_eq!(c.llm.api_key.as_ref().unwrap().expose(), "sk-ant-env");
        assert_eq!(c.llm.api_key_from, Some("ANTHROPIC_API_KEY"));
        assert_eq!(
            c.llm.base_url.as_ref().unwrap().as_str(),
            "http://127.0.0.1:9"
        );
        assert_eq!(c.transport(), Transport::Anthropic);
        let f = &c.llm.fallbacks[0];
        assert_eq!(f.api_key.as_ref().unwrap().expose(), "sk-or");
        assert_eq!(
            f.base_url.as_ref().unwrap().as_str(),
            "https://openrouter.ai/api/v1"
        );
        assert_eq!(f.transport(), Transport::OpenAi);
        let w = &c.handoff.writer[0];
        assert_eq!(w.api_key.as_ref().unwrap().expose(), "sk-file");
        assert_eq!(w.api_key_from, None);
        assert_eq!(
            w.base_url.as_ref().unwrap().as_str(),
            "https://api.anthropic.com"
        );
    }
}
