//! The rules a loaded configuration must satisfy before anything starts, each error naming
//! the key to fix: addresses, the access token, providers, lanes, adapters, cron jobs.

use std::net::SocketAddr;

use super::load::ConfigError;
use super::{Config, ProviderKind, TelegramMode};

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
    for (key, v) in [
        ("server.header_timeout_secs", c.server.header_timeout_secs),
        ("server.idle_timeout_secs", c.server.idle_timeout_secs),
        ("server.max_connections", c.server.max_connections as u64),
    ] {
        if v == 0 {
            return Err(ConfigError::Key {
                key,
                message: "must be at least 1".into(),
            });
        }
    }
    for (key, ms) in [
        (
            "streaming.edit_interval_ms",
            Some(c.streaming.edit_interval_ms),
        ),
        (
            "streaming.telegram_edit_interval_ms",
            c.streaming.telegram_edit_interval_ms,
        ),
        (
            "streaming.discord_edit_interval_ms",
            c.streaming.discord_edit_interval_ms,
        ),
    ] {
        if ms.is_some_and(|ms| !(super::MIN_EDIT_INTERVAL_MS..=60_000).contains(&ms)) {
            return Err(ConfigError::Key {
                key,
                message: format!(
                    "must be between {} and 60000 milliseconds (the platforms rate-limit edits)",
                    super::MIN_EDIT_INTERVAL_MS
                ),
            });
        }
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
    if let Err((key, message)) = c.memory.check() {
        return Err(ConfigError::Key { key, message });
    }
    super::check_people(&c.people).map_err(ConfigError::Invalid)?;
    if !(0.05..=0.99).contains(&c.context.in_turn_threshold) {
        return Err(ConfigError::Key {
            key: "context.in_turn_threshold",
            message: "must be between 0.05 and 0.99".into(),
        });
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
    mcp_servers(&c.mcp.servers)?;
    Ok(())
}

/// `[[mcp.servers]]`: unique safe names, stdio or HTTP (not both), `"all"` the only word.
fn mcp_servers(servers: &[super::McpServer]) -> Result<(), ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, s) in servers.iter().enumerate() {
        let bad = |m: String| {
            Err(ConfigError::Invalid(format!(
                "mcp.servers[{i}] ({:?}): {m}",
                s.name
            )))
        };
        if !super::valid_server_name(&s.name) {
            return bad(
                "name must be 1-32 of a-z 0-9 _ - starting with a letter, without \"__\"".into(),
            );
        }
        if !seen.insert(s.name.as_str()) {
            return bad("another server has this name".into());
        }
        match (&s.command, &s.url) {
            (Some(c), None) if !c.trim().is_empty() => {
                if s.bearer_token.is_some() || !s.headers.is_empty() {
                    return bad("bearer_token and headers are for a url server".into());
                }
            }
            (None, Some(u)) => {
                let ok = url::Url::parse(u).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
                if !ok {
                    return bad(format!("url {u:?} is not an http(s) URL"));
                }
                if !s.args.is_empty() || !s.env.is_empty() {
                    return bad("args and env are for a command server".into());
                }
            }
            _ => return bad("set either command (stdio) or url (streamable HTTP)".into()),
        }
        if let super::RequireApproval::Word(w) = &s.require_approval {
            if w != "all" {
                return bad(format!(
                    "require_approval is a list of tool names or \"all\", not {w:?}"
                ));
            }
        }
        if s.timeout_secs == 0 || s.init_timeout_secs == 0 {
            return bad("timeout_secs and init_timeout_secs must be at least 1".into());
        }
        for name in s.headers.keys() {
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return bad(format!("headers: {name:?} is not a header name"));
            }
        }
    }
    Ok(())
}
