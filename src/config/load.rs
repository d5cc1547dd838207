//! Layering and validation. Errors name the key an operator has to fix.

use std::net::SocketAddr;
use std::path::PathBuf;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use serde::{Deserialize, Deserializer};

use super::{Config, ProviderKind, Secret, TelegramMode};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {0} does not exist")]
    MissingFile(PathBuf),
    /// The file (or a folder on its path) exists but this user may not read it: the usual
    /// systemd mistake, a root-owned 0640 file the service's user is not a group member of.
    #[error(
        "config file {0} cannot be read by this user (permission denied): give the user Herald \
         runs as read access to the file and every folder above it (e.g. `chgrp herald` and \
         `chmod 0640` the file, `chmod 0750` its folder)"
    )]
    Unreadable(PathBuf),
    #[error("invalid configuration: {0}")]
    Invalid(String),
    #[error("invalid configuration: {key}: {message}")]
    Key { key: &'static str, message: String },
}

/// Where configuration comes from; command-line flags win over everything.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    pub file: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub listen: Option<String>,
    /// Read `HERALD_*` and the conventional `OPENAI_*` / `TELEGRAM_BOT_TOKEN` variables.
    pub use_env: bool,
}

pub fn load(opts: &LoadOptions) -> Result<Config, ConfigError> {
    let mut fig = Figment::from(Serialized::defaults(Config::default()));
    if let Some(file) = &opts.file {
        // Not `exists()`: it answers false for a file behind a folder we may not enter.
        if let Err(e) = std::fs::File::open(file) {
            return Err(match e.kind() {
                std::io::ErrorKind::PermissionDenied => ConfigError::Unreadable(file.clone()),
                std::io::ErrorKind::NotFound => ConfigError::MissingFile(file.clone()),
                _ => ConfigError::Invalid(format!("config file {}: {e}", file.display())),
            });
        }
        fig = fig.merge(Toml::file_exact(file));
    }
    if opts.use_env {
        fig = fig.merge(Env::prefixed("HERALD_").split("__"));
    }
    let mut config: Config = fig
        .extract()
        .map_err(|e| ConfigError::Invalid(flatten_figment_error(e)))?;
    if opts.use_env {
        apply_conventional_env(&mut config, |k| std::env::var(k).ok());
    }
    if let Some(d) = &opts.data_dir {
        config.server.data_dir = d.clone();
    }
    if let Some(l) = &opts.listen {
        config.server.listen = l.clone();
    }
    validate(&config)?;
    Ok(config)
}

/// Parses a TOML string on top of the defaults (tests, `herald doctor`).
pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
    let config: Config = Figment::from(Serialized::defaults(Config::default()))
        .merge(Toml::string(text))
        .extract()
        .map_err(|e| ConfigError::Invalid(flatten_figment_error(e)))?;
    validate(&config)?;
    Ok(config)
}

fn flatten_figment_error(e: figment::Error) -> String {
    e.into_iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL` and `TELEGRAM_BOT_TOKEN` fill keys the
/// Herald variables left unset.
pub(crate) fn apply_conventional_env(config: &mut Config, get: impl Fn(&str) -> Option<String>) {
    let nonempty = |k: &str| get(k).filter(|v| !v.trim().is_empty());
    if config.llm.base_url.is_none() {
        config.llm.base_url = nonempty("OPENAI_BASE_URL");
    }
    if config.llm.api_key.is_none() {
        config.llm.api_key = nonempty("OPENAI_API_KEY").map(Secret::new);
    }
    if config.llm.model.is_none() {
        config.llm.model = nonempty("OPENAI_MODEL");
    }
    if config.telegram.token.is_none() {
        config.telegram.token = nonempty("TELEGRAM_BOT_TOKEN").map(Secret::new);
    }
    if config.discord.token.is_none() {
        config.discord.token = nonempty("DISCORD_BOT_TOKEN").map(Secret::new);
    }
}

pub fn validate(c: &Config) -> Result<(), ConfigError> {
    let addr: SocketAddr = c.server.listen.parse().map_err(|e| ConfigError::Key {
        key: "server.listen",
        message: format!(
            "{:?} is not an address like 127.0.0.1:8080 ({e})",
            c.server.listen
        ),
    })?;
    // The admin API and every transcript sit behind this listener whether or not the web chat
    // is on, so the token follows the address, not `web.enabled`.
    if c.web
        .token
        .as_ref()
        .is_some_and(|t| t.expose().trim().is_empty())
    {
        return Err(ConfigError::Key {
            key: "web.token",
            message: "is empty; set a long random value (openssl rand -hex 32) or remove the key"
                .into(),
        });
    }
    if !addr.ip().is_loopback() && c.web.token.is_none() {
        return Err(ConfigError::Key {
            key: "web.token",
            message: format!(
                "required when server.listen ({addr}) is not a loopback address; \
                 set HERALD_WEB__TOKEN or bind to 127.0.0.1"
            ),
        });
    }
    if c.web.trust_loopback == Some(false) && c.web.token.is_none() {
        return Err(ConfigError::Key {
            key: "web.token",
            message: "required when web.trust_loopback is false (nobody could use the API)".into(),
        });
    }
    match c.provider_kind() {
        ProviderKind::Openai => {
            let base = c.llm.base_url.as_deref().unwrap_or("");
            if url::Url::parse(base).is_err() {
                return Err(ConfigError::Key {
                    key: "llm.base_url",
                    message: format!(
                        "{base:?} is not a URL (set HERALD_LLM__BASE_URL or OPENAI_BASE_URL, \
                         e.g. https://api.openai.com/v1)"
                    ),
                });
            }
            if c.llm.model.as_deref().unwrap_or("").is_empty() {
                return Err(ConfigError::Key {
                    key: "llm.model",
                    message: "a model name is required with an OpenAI-compatible provider \
                              (set HERALD_LLM__MODEL or OPENAI_MODEL)"
                        .into(),
                });
            }
        }
        ProviderKind::Auto | ProviderKind::Echo | ProviderKind::None => {}
    }
    if !(c.context.threshold > 0.0 && c.context.threshold < 1.0) {
        return Err(ConfigError::Key {
            key: "context.threshold",
            message: format!(
                "{} must be between 0 and 1 (e.g. 0.75)",
                c.context.threshold
            ),
        });
    }
    for (i, f) in c.llm.fallbacks.iter().enumerate() {
        if url::Url::parse(&f.base_url).is_err() || f.model.is_empty() {
            return Err(ConfigError::Key {
                key: "llm.fallbacks",
                message: format!("entry {i} needs a base_url URL and a model"),
            });
        }
    }
    if c.llm.timeout_secs == 0 {
        return Err(ConfigError::Key {
            key: "llm.timeout_secs",
            message: "must be at least 1".into(),
        });
    }
    if c.lanes.heartbeat_secs == 0 || c.lanes.heartbeat_secs * 2 > c.lanes.lease_ttl_secs {
        return Err(ConfigError::Key {
            key: "lanes.heartbeat_secs",
            message: format!(
                "must be at least 1 and at most half of lanes.lease_ttl_secs ({})",
                c.lanes.lease_ttl_secs
            ),
        });
    }
    if c.lanes.max_workers == 0 {
        return Err(ConfigError::Key {
            key: "lanes.max_workers",
            message: "must be at least 1".into(),
        });
    }
    if c.lanes.max_attempts < 1 || c.outbox.max_attempts < 1 {
        return Err(ConfigError::Key {
            key: "lanes.max_attempts",
            message: "attempt limits (lanes.max_attempts, outbox.max_attempts) must be at least 1"
                .into(),
        });
    }
    if let Some(url) = &c.store.url {
        let u = url.expose();
        if !(u.starts_with("sqlite:")
            || u.starts_with("postgres://")
            || u.starts_with("postgresql://"))
        {
            return Err(ConfigError::Key {
                key: "store.url",
                message: "must start with sqlite:// or postgres://".into(),
            });
        }
    }
    if c.telegram.token.is_some() {
        if url::Url::parse(&c.telegram.api_url).is_err() {
            return Err(ConfigError::Key {
                key: "telegram.api_url",
                message: format!("{:?} is not a URL", c.telegram.api_url),
            });
        }
        if c.telegram.mode == TelegramMode::Webhook
            && (c.telegram.webhook_secret.is_none() || c.telegram.webhook_url.is_none())
        {
            return Err(ConfigError::Key {
                key: "telegram.webhook_secret",
                message: "webhook mode needs telegram.webhook_secret and telegram.webhook_url"
                    .into(),
            });
        }
        // The webhook is served on the URL's path: it must not be one of the daemon's own.
        if let Some(path) = c.telegram.webhook_url.as_deref().and_then(|u| {
            url::Url::parse(u)
                .ok()
                .map(|u| u.path().trim_end_matches('/').to_string())
        }) {
            let own = ["/admin", "/healthz", "/readyz", "/metrics"].contains(&path.as_str())
                || path == "/api"
                || path.starts_with("/api/");
            if c.telegram.mode == TelegramMode::Webhook && own {
                return Err(ConfigError::Key {
                    key: "telegram.webhook_url",
                    message: format!(
                        "its path {path:?} is one of Herald's own routes; updates are received \
                         on that path, so choose another (e.g. /telegram/webhook)"
                    ),
                });
            }
        }
    }
    if c.discord.token.is_some()
        && c.discord.ratelimiter
        && c.discord.api_url.trim_end_matches('/')
            != super::DiscordConfig::default()
                .api_url
                .trim_end_matches('/')
    {
        return Err(ConfigError::Key {
            key: "discord.ratelimiter",
            message: format!(
                "must be false with discord.api_url = {:?}: serenity's ratelimiter ignores \
                 api_url and would talk to discord.com directly",
                c.discord.api_url
            ),
        });
    }
    if let Some(ep) = &c.telemetry.otlp_endpoint {
        if !url::Url::parse(ep).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
            return Err(ConfigError::Key {
                key: "telemetry.otlp_endpoint",
                message: format!("{ep:?} is not an http(s) URL like http://127.0.0.1:4318"),
            });
        }
    }
    if let Err((key, message)) = c.handoff.nightly_schedule() {
        return Err(ConfigError::Key { key, message });
    }
    if let Err((i, e)) = crate::domain::cron::check_jobs(&c.cron.jobs, &c.delivery_platforms()) {
        return Err(ConfigError::Invalid(format!(
            "cron.jobs[{i}].{}: {e}",
            e.key()
        )));
    }
    Ok(())
}

/// Accepts `["1", 2]`: platform ids are written both ways in TOML and env variables.
pub(crate) fn strings_or_numbers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Item {
        S(String),
        I(i64),
        U(u64),
    }
    let items = Vec::<Item>::deserialize(d)?;
    Ok(items
        .into_iter()
        .map(|i| match i {
            Item::S(s) => s,
            Item::I(n) => n.to_string(),
            Item::U(n) => n.to_string(),
        })
        .collect())
}

pub(crate) fn string_or_number<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Item {
        S(String),
        I(i64),
        U(u64),
    }
    Ok(match Item::deserialize(d)? {
        Item::S(s) => s,
        Item::I(n) => n.to_string(),
        Item::U(n) => n.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_embedded() {
        let c = from_toml("").unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:8080");
        assert_eq!(c.store_url(), "sqlite://./data/herald.db");
        assert_eq!(c.provider_kind(), ProviderKind::None);
    }

    #[test]
    fn example_file_parses_and_covers_every_section() {
        let text = include_str!("../../config/herald.example.toml");
        let c = from_toml(text).expect("example config parses");
        // Copying the example must change nothing: every value in it is the default, so the
        // environment (OPENAI_BASE_URL, OPENAI_MODEL, …) still fills what the operator left out.
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            serde_json::to_value(Config::default()).unwrap(),
            "config/herald.example.toml sets a value that is not the default"
        );
        assert_eq!(c.provider_kind(), ProviderKind::None);
        for section in [
            "[server]",
            "[store]",
            "[llm]",
            "[agent]",
            "[lanes]",
            "[outbox]",
            "[web]",
            "[telegram]",
            "[cron]",
            "[log]",
        ] {
            assert!(text.contains(section), "example lacks {section}");
        }
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            ("[server]\nlisten = \"nowhere\"", "server.listen"),
            ("[server]\nlisten = \"0.0.0.0:8080\"", "web.token"),
            // The admin API is there with the web chat off: the token still follows the address.
            (
                "[server]\nlisten = \"0.0.0.0:8080\"\n[web]\nenabled = false",
                "web.token: required when server.listen",
            ),
            ("[web]\ntoken = \"\"", "web.token: is empty"),
            ("[web]\ntoken = \"  \"", "web.token: is empty"),
            ("[web]\ntrust_loopback = false", "web.token: required when web.trust_loopback"),
            (
                "[llm]\nprovider = \"openai\"\nmodel = \"m\"",
                "llm.base_url",
            ),
            ("[llm]\nbase_url = \"http://x/v1\"", "llm.model"),
            (
                "[lanes]\nheartbeat_secs = 20\nlease_ttl_secs = 30",
                "lanes.heartbeat_secs",
            ),
            ("[store]\nurl = \"mysql://x\"", "store.url"),
            (
                "[telegram]\ntoken = \"1:a\"\nmode = \"webhook\"\nwebhook_secret = \"s\"\n\
                 webhook_url = \"https://h.example/healthz\"",
                "telegram.webhook_url",
            ),
            (
                "[discord]\ntoken = \"t\"\napi_url = \"http://127.0.0.1:9\"",
                "discord.ratelimiter",
            ),
            ("[llm]\ntimeout_secs = \"soon\"", "timeout_secs"),
            ("[lanes]\nunknown_key = 1", "unknown_key"),
            (
                "[[cron.jobs]]\nname = \"m\"\nschedule = \"every 1h\"\nprompt = \"p\"\n\
                 deliver = [\"slack:1\"]",
                "cron.jobs[0].deliver: cron job \"m\": unknown platform \"slack\"",
            ),
            (
                "[[cron.jobs]]\nname = \"m\"\nschedule = \"every 1h\"\nprompt = \"p\"\n\
                 deliver = [\"telegram:5\"]",
                "cron.jobs[0].deliver: cron job \"m\": delivery target \"telegram:5\" needs the telegram adapter",
            ),
        ];
        for (toml, key) in cases {
            let err = from_toml(toml).unwrap_err().to_string();
            assert!(
                err.contains(key),
                "{toml:?} gave {err:?}, expected it to name {key}"
            );
        }
    }

    #[test]
    fn non_loopback_with_token_is_fine() {
        let c = from_toml("[server]\nlisten = \"0.0.0.0:8080\"\n[web]\ntoken = \"t\"").unwrap();
        assert_eq!(c.web.token.unwrap().expose(), "t");
    }

    #[test]
    fn conventional_env_fills_only_unset_keys() {
        let mut c = from_toml("[llm]\nprovider = \"none\"\nmodel = \"mine\"").unwrap();
        apply_conventional_env(&mut c, |k| match k {
            "OPENAI_BASE_URL" => Some("http://127.0.0.1:9/v1".into()),
            "OPENAI_API_KEY" => Some("sk-x".into()),
            "OPENAI_MODEL" => Some("theirs".into()),
            "TELEGRAM_BOT_TOKEN" => Some("1:abc".into()),
            _ => None,
        });
        assert_eq!(c.llm.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(c.llm.api_key.as_ref().unwrap().expose(), "sk-x");
        assert_eq!(c.llm.model.as_deref(), Some("mine"));
        assert_eq!(c.telegram.token.as_ref().unwrap().expose(), "1:abc");
    }

    #[test]
    fn ids_may_be_numbers_or_strings() {
        let c = from_toml("[telegram]\nallowed_users = [12, \"34\"]").unwrap();
        assert_eq!(c.telegram.allowed_users, vec!["12", "34"]);
    }
}
