//! The rules a loaded configuration must satisfy before anything starts, each error naming
//! the key to fix: addresses, the access token, providers, lanes, adapters, cron jobs.

use std::net::SocketAddr;

use super::load::ConfigError;
use super::{Config, ProviderKind, TelegramMode, Transport};

/// Every rule, section by section; the first one broken is the error.
pub fn validate(c: &Config) -> Result<(), ConfigError> {
    server(c)?;
    delegate(c)?;
    web_access(c, c.server.listen)?;
    streaming(c)?;
    llm_of(c)?;
    context(c)?;
    lanes(c)?;
    store(c)?;
    telegram(c)?;
    discord(c)?;
    telemetry(c)?;
    media(c)?;
    if let Err((key, message)) = c.budget.check() {
        return Err(ConfigError::Key { key, message });
    }
    if let Err((key, message)) = c.voice.check() {
        return Err(ConfigError::Key { key, message });
    }
    if let Err((key, message)) = c.web_tools.check() {
        return Err(ConfigError::Key { key, message });
    }
    if let Err((key, message)) = c.memory.check() {
        return Err(ConfigError::Key { key, message });
    }
    super::check_people(&c.people).map_err(|e| ConfigError::Invalid(e.to_string()))?;
    if let Err((key, message)) = c.approvals.check(&c.people) {
        return Err(ConfigError::Key { key, message });
    }
    if let Err((key, message)) = c.api.check(c) {
        return Err(ConfigError::Invalid(format!("{key}: {message}")));
    }
    if let Err((key, message)) = c.handoff.nightly_schedule() {
        return Err(ConfigError::Key { key, message });
    }
    if let Err((key, message)) = super::agents::check_agents(c) {
        return Err(ConfigError::Invalid(format!("{key}: {message}")));
    }
    super::registry::check_sections(c)?;
    if let Err((i, e)) = crate::domain::cron::check_jobs(&c.cron.jobs, &c.deliverable()) {
        return Err(ConfigError::Invalid(format!(
            "cron.jobs[{i}].{}: {e}",
            e.key()
        )));
    }
    super::check_hooks(&c.hooks, c.cron.enabled, &c.deliverable()).map_err(ConfigError::Invalid)?;
    mcp_servers(&c.mcp.servers)
}

fn key_error(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Key {
        key,
        message: message.into(),
    }
}

/// `[server]`: the connection limits (the address is typed, so it was checked on load).
fn server(c: &Config) -> Result<(), ConfigError> {
    for (key, v) in [
        ("server.header_timeout_secs", c.server.header_timeout_secs),
        ("server.idle_timeout_secs", c.server.idle_timeout_secs),
        ("server.body_timeout_secs", c.server.body_timeout_secs),
        (
            "web.max_concurrent_requests",
            c.web.max_concurrent_requests as u64,
        ),
        (
            "api.max_concurrent_per_key",
            c.api.max_concurrent_per_key as u64,
        ),
        ("server.max_connections", c.server.max_connections as u64),
    ] {
        if v == 0 {
            return Err(key_error(key, "must be at least 1"));
        }
    }
    Ok(())
}

/// `tools.delegate_*`: a batch needs room for one child, a child for one model turn.
fn delegate(c: &Config) -> Result<(), ConfigError> {
    for (key, v) in [
        (
            "tools.delegate_max_parallel",
            c.tools.delegate_max_parallel as u64,
        ),
        (
            "tools.delegate_max_iterations",
            c.tools.delegate_max_iterations as u64,
        ),
    ] {
        if v == 0 {
            return Err(key_error(key, "must be at least 1"));
        }
    }
    Ok(())
}

/// `web.token` and `web.trust_loopback`. The admin API and every transcript sit behind the
/// listener whether or not the web chat is on, so the token follows the address, not
/// `web.enabled`.
fn web_access(c: &Config, addr: SocketAddr) -> Result<(), ConfigError> {
    if c.web
        .token
        .as_ref()
        .is_some_and(|t| t.expose().trim().is_empty())
    {
        return Err(key_error(
            "web.token",
            "is empty; set a long random value (openssl rand -hex 32) or remove the key",
        ));
    }
    if !addr.ip().is_loopback() && c.web.token.is_none() {
        return Err(key_error(
            "web.token",
            format!(
                "required when server.listen ({addr}) is not a loopback address; \
                 set HERALD_WEB__TOKEN or bind to 127.0.0.1"
            ),
        ));
    }
    if c.web.trust_loopback == Some(false) && c.web.token.is_none() {
        return Err(key_error(
            "web.token",
            "required when web.trust_loopback is false (nobody could use the API)",
        ));
    }
    Ok(())
}

/// `[media]`: a fetch cap and timeout that let something through, hosts that are hosts.
fn media(c: &Config) -> Result<(), ConfigError> {
    let m = &c.media;
    for (key, bad) in [
        ("media.max_bytes", m.max_bytes == 0),
        ("media.fetch_timeout_secs", m.fetch_timeout_secs == 0),
        ("media.document_chars", m.document_chars == 0),
        ("media.decode_memory_mb", m.decode_memory_mb == 0),
        ("media.decode_timeout_secs", m.decode_timeout_secs == 0),
        ("media.max_unpacked_bytes", m.max_unpacked_bytes == 0),
        ("media.max_pages", m.max_pages == 0),
        ("media.max_image_pixels", m.max_image_pixels == 0),
        (
            "media.transcription_model",
            m.transcription_model.trim().is_empty(),
        ),
    ] {
        if bad {
            return Err(ConfigError::Key {
                key,
                message: "must not be zero or empty".into(),
            });
        }
    }
    if let Some(bad) = m
        .allow_private_hosts
        .iter()
        .find(|h| crate::net::HostRule::parse(h).is_none())
    {
        return Err(key_error(
            "media.allow_private_hosts",
            format!("{bad:?} is not a host or host:port (like files.internal or 10.0.0.5:9000)"),
        ));
    }
    Ok(())
}

/// `[streaming]`: edit intervals within what the platforms allow.
fn streaming(c: &Config) -> Result<(), ConfigError> {
    let s = &c.streaming;
    for (key, ms) in [
        ("streaming.edit_interval_ms", Some(s.edit_interval_ms)),
        (
            "streaming.telegram_edit_interval_ms",
            s.telegram_edit_interval_ms,
        ),
        (
            "streaming.discord_edit_interval_ms",
            s.discord_edit_interval_ms,
        ),
    ] {
        if ms.is_some_and(|ms| !(super::MIN_EDIT_INTERVAL_MS..=60_000).contains(&ms)) {
            return Err(key_error(
                key,
                format!(
                    "must be between {} and 60000 milliseconds (the platforms rate-limit edits)",
                    super::MIN_EDIT_INTERVAL_MS
                ),
            ));
        }
    }
    Ok(())
}

/// `[llm]`: a model provider needs a URL and a model (a preset fills the URL), and so does each
/// fallback and writer entry; an Anthropic answer needs a token budget.
/// The `[llm]` rules, also run on each agent's derived configuration.
pub(crate) fn llm_of(c: &Config) -> Result<(), ConfigError> {
    if matches!(c.transport(), Transport::OpenAi | Transport::Anthropic) {
        if c.llm.base_url.is_none() {
            return Err(key_error("llm.base_url", not_a_base_url("")));
        }
        if c.llm.model.as_deref().unwrap_or("").is_empty() {
            return Err(key_error(
                "llm.model",
                "a model name is required with a model provider \
                 (set HERALD_LLM__MODEL, OPENAI_MODEL or ANTHROPIC_MODEL)",
            ));
        }
    }
    for (key, list) in [
        ("llm.fallbacks", &c.llm.fallbacks),
        ("handoff.writer", &c.handoff.writer),
        ("eval.judge", &c.eval.judge),
    ] {
        for (i, f) in list.iter().enumerate() {
            if f.base_url.is_none() || f.model.is_empty() {
                return Err(key_error(
                    key,
                    format!("entry {i} needs a base_url URL (or a provider preset) and a model"),
                ));
            }
            if matches!(
                f.provider,
                Some(ProviderKind::Echo | ProviderKind::None | ProviderKind::Auto)
            ) {
                return Err(key_error(
                    key,
                    format!("entry {i}: provider must name a model provider preset"),
                ));
            }
        }
    }
    if c.llm.timeout_secs == 0 {
        return Err(key_error("llm.timeout_secs", "must be at least 1"));
    }
    if c.llm.max_tokens == 0 {
        return Err(key_error("llm.max_tokens", "must be at least 1"));
    }
    Ok(())
}

/// The `llm.base_url` message, also given when a base URL variable is not a URL.
pub(super) fn not_a_base_url(text: &str) -> String {
    format!(
        "{text:?} is not a URL (set HERALD_LLM__BASE_URL, OPENAI_BASE_URL or ANTHROPIC_BASE_URL, \
         e.g. https://api.openai.com/v1)"
    )
}

/// `[context]`: both compaction thresholds are shares of the window.
fn context(c: &Config) -> Result<(), ConfigError> {
    let t = c.context.threshold;
    if !(t > 0.0 && t < 1.0) {
        return Err(key_error(
            "context.threshold",
            format!("{t} must be between 0 and 1 (e.g. 0.75)"),
        ));
    }
    if !(0.05..=0.99).contains(&c.context.in_turn_threshold) {
        return Err(key_error(
            "context.in_turn_threshold",
            "must be between 0.05 and 0.99",
        ));
    }
    Ok(())
}

/// `[lanes]`, `[inbox]` and `[outbox]`: a lease renewed well before it expires, attempts at least one.
fn lanes(c: &Config) -> Result<(), ConfigError> {
    let l = &c.lanes;
    if l.heartbeat_secs == 0 || l.heartbeat_secs * 2 > l.lease_ttl_secs {
        return Err(key_error(
            "lanes.heartbeat_secs",
            format!(
                "must be at least 1 and at most half of lanes.lease_ttl_secs ({})",
                l.lease_ttl_secs
            ),
        ));
    }
    if l.max_workers == 0 {
        return Err(key_error("lanes.max_workers", "must be at least 1"));
    }
    if c.inbox.max_attempts < 1 || c.outbox.max_attempts < 1 {
        return Err(key_error(
            "inbox.max_attempts",
            "attempt limits (inbox.max_attempts, outbox.max_attempts) must be at least 1",
        ));
    }
    Ok(())
}

/// `store.url`: one of the two backends.
fn store(c: &Config) -> Result<(), ConfigError> {
    let Some(url) = &c.store.url else {
        return Ok(());
    };
    let u = url.expose();
    if ["sqlite:", "postgres://", "postgresql://"]
        .iter()
        .any(|p| u.starts_with(p))
    {
        Ok(())
    } else {
        Err(key_error(
            "store.url",
            "must start with sqlite:// or postgres://",
        ))
    }
}

/// `[telegram]` when the adapter runs: its API URL, and a webhook that can be registered and
/// does not shadow one of the daemon's own routes.
fn telegram(c: &Config) -> Result<(), ConfigError> {
    let t = &c.telegram;
    if t.token.is_none() {
        return Ok(());
    }
    if !t.api_url.is_http() || t.api_url.url().cannot_be_a_base() {
        return Err(key_error(
            "telegram.api_url",
            format!("{:?} is not an http(s) base URL", t.api_url.as_str()),
        ));
    }
    if t.mode != TelegramMode::Webhook {
        return Ok(());
    }
    if t.webhook_secret.is_none() || t.webhook_url.is_none() {
        return Err(key_error(
            "telegram.webhook_secret",
            "webhook mode needs telegram.webhook_secret and telegram.webhook_url",
        ));
    }
    // The webhook is served on the URL's path: it must not be one of the daemon's own.
    if let Some(u) = &t.webhook_url {
        let path = u.url().path().trim_end_matches('/');
        let own = ["/admin", "/healthz", "/readyz", "/metrics"].contains(&path)
            || path == "/api"
            || path.starts_with("/api/");
        if own {
            return Err(key_error(
                "telegram.webhook_url",
                format!(
                    "its path {path:?} is one of Herald's own routes; updates are received \
                     on that path, so choose another (e.g. /telegram/webhook)"
                ),
            ));
        }
    }
    Ok(())
}

/// `[discord]`: serenity's ratelimiter ignores `api_url`, so a non-default URL needs it off.
fn discord(c: &Config) -> Result<(), ConfigError> {
    let d = &c.discord;
    let default_url = super::DiscordConfig::default().api_url;
    if d.token.is_some()
        && d.ratelimiter
        && d.api_url.as_str().trim_end_matches('/') != default_url.as_str().trim_end_matches('/')
    {
        return Err(key_error(
            "discord.ratelimiter",
            format!(
                "must be false with discord.api_url = {:?}: serenity's ratelimiter ignores \
                 api_url and would talk to discord.com directly",
                d.api_url.as_str()
            ),
        ));
    }
    Ok(())
}

/// `telemetry.otlp_endpoint`: an http(s) collector when set.
fn telemetry(c: &Config) -> Result<(), ConfigError> {
    if let Some(ep) = &c.telemetry.otlp_endpoint {
        if !ep.is_http() {
            return Err(key_error(
                "telemetry.otlp_endpoint",
                format!("{ep:?} is not an http(s) URL like http://127.0.0.1:4318"),
            ));
        }
    }
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
                if !u.is_http() {
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
