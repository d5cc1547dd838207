//! Layering: defaults → TOML file → `HERALD_*` environment, then the `OPENAI_*` and bot-token
//! fallbacks. The rules a loaded config must satisfy are `validate.rs`'s; errors name the key
//! an operator has to fix.

use std::path::PathBuf;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::value::Value;
use figment::Figment;
use serde::{Deserialize, Deserializer};

use super::{validate, Config, ConfigUrl, Secret, Transport};

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

/// Variables the command line itself reads (clap's `env =` in `main.rs`). They are never
/// config keys: `HERALD_CONFIG` read as one was the unknown key `config`, and every command
/// exited 2 in exactly the setup the docs and the k8s recipe describe.
pub const CLI_ENV: &[&str] = &["HERALD_CONFIG"];

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
        // Variables a `*_env` key names (`api.keys[].key_env = "HERALD_API_KEY_LAPTOP"`) hold
        // a secret for that key; read as configuration they were unknown keys and stopped
        // the daemon.
        let mut not_keys: Vec<String> = CLI_ENV.iter().map(|v| v.to_string()).collect();
        not_keys.extend(named_variables(&fig)?);
        let not_keys: Vec<String> = not_keys
            .iter()
            .filter_map(|v| strip_prefix_ignore_case(v, "HERALD_"))
            .map(str::to_string)
            .collect();
        let ignored: Vec<&str> = not_keys.iter().map(String::as_str).collect();
        fig = fig.merge(Env::prefixed("HERALD_").ignore(&ignored).split("__"));
    }
    let mut config: Config = fig
        .extract()
        .map_err(|e| ConfigError::Invalid(flatten_figment_error(e)))?;
    if opts.use_env {
        apply_conventional_env(&mut config, |k| std::env::var(k).ok())?;
    }
    super::providers::apply_presets(&mut config);
    config.fold_deprecated();
    if let Some(d) = &opts.data_dir {
        config.server.data_dir = d.clone();
    }
    if let Some(l) = &opts.listen {
        config.server.listen = l.parse().map_err(|e| ConfigError::Key {
            key: "server.listen",
            message: format!("{l:?} is not an address like 127.0.0.1:8080 ({e})"),
        })?;
    }
    validate(&config)?;
    Ok(config)
}

/// Parses a TOML string on top of the defaults (tests, `herald doctor`).
pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
    let mut config: Config = Figment::from(Serialized::defaults(Config::default()))
        .merge(Toml::string(text))
        .extract()
        .map_err(|e| ConfigError::Invalid(flatten_figment_error(e)))?;
    super::providers::apply_presets(&mut config);
    config.fold_deprecated();
    validate(&config)?;
    Ok(config)
}

/// Every environment variable a `*_env` key of the configuration so far names (`key_env`,
/// `password_env`, `token_env`, …, at any depth, in tables and arrays of tables).
fn named_variables(fig: &Figment) -> Result<Vec<String>, ConfigError> {
    fn walk(key: Option<&str>, value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Dict(_, dict) => dict.iter().for_each(|(k, v)| walk(Some(k), v, out)),
            Value::Array(_, items) => items.iter().for_each(|v| walk(key, v, out)),
            Value::String(_, name) if key.is_some_and(|k| k.ends_with("_env")) => {
                out.push(name.trim().to_string())
            }
            _ => {}
        }
    }
    let value: Value = fig
        .extract()
        .map_err(|e| ConfigError::Invalid(flatten_figment_error(e)))?;
    let mut out = Vec::new();
    walk(None, &value, &mut out);
    Ok(out)
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

fn flatten_figment_error(e: figment::Error) -> String {
    e.into_iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The provider's conventional variables (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `OPENAI_MODEL`;
/// `ANTHROPIC_*` with the anthropic preset; `OPENROUTER_API_KEY`, … for the others), then
/// `TELEGRAM_BOT_TOKEN` and `DISCORD_BOT_TOKEN`, fill keys the Herald variables left unset. A
/// base URL variable that is not a URL is an error naming `llm.base_url`, as the same text in
/// the file would be.
pub(crate) fn apply_conventional_env(
    config: &mut Config,
    get: impl Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let nonempty = |k: &str| get(k).filter(|v| !v.trim().is_empty());
    let (base_env, key_env, model_env) = match config.llm.provider.preset() {
        Some(p) => (
            p.base_url_env,
            p.key_env,
            p.model_env
                .or((p.transport == Transport::OpenAi).then_some("OPENAI_MODEL")),
        ),
        None => (
            Some("OPENAI_BASE_URL"),
            Some("OPENAI_API_KEY"),
            Some("OPENAI_MODEL"),
        ),
    };
    if let (None, Some(var)) = (&config.llm.base_url, base_env) {
        if let Some(text) = nonempty(var) {
            let url = ConfigUrl::parse(&text).map_err(|_| ConfigError::Key {
                key: "llm.base_url",
                message: super::validate::not_a_base_url(&text),
            })?;
            config.llm.base_url = Some(url);
        }
    }
    if let (None, Some(var)) = (&config.llm.api_key, key_env) {
        config.llm.api_key = nonempty(var).map(Secret::new);
        config.llm.api_key_from = config.llm.api_key.as_ref().map(|_| var);
    }
    if let (None, Some(var)) = (&config.llm.model, model_env) {
        config.llm.model = nonempty(var);
    }
    let get: &dyn Fn(&str) -> Option<String> = &get;
    for e in config
        .llm
        .fallbacks
        .iter_mut()
        .chain(config.handoff.writer.iter_mut())
        .chain(config.eval.judge.iter_mut())
    {
        super::providers::fill_endpoint(e, Some(get));
    }
    super::agents::fill_agents(config, Some(get));
    if config.telegram.token.is_none() {
        config.telegram.token = nonempty("TELEGRAM_BOT_TOKEN").map(Secret::new);
    }
    if config.discord.token.is_none() {
        config.discord.token = nonempty("DISCORD_BOT_TOKEN").map(Secret::new);
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
    use crate::config::ProviderKind;

    #[test]
    fn defaults_are_valid_and_embedded() {
        let c = from_toml("").unwrap();
        assert_eq!(c.server.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.store_url(), "sqlite://./data/herald.db");
        assert_eq!(c.provider_kind(), ProviderKind::None);
    }

    #[test]
    fn example_file_parses_and_covers_every_section() {
        let text = include_str!("../../config/herald.example.toml");
        let c = from_toml(text).expect("example config parses");
        // Copying the example must change nothing: every value in it is the default, so the
        // environment (OPENAI_BASE_URL, OPENAI_MODEL, …) still fills what the operator left out.
        // A platform's own table is held to its owner's defaults.
        let mut defaults = serde_json::to_value(Config::default()).unwrap();
        for spec in crate::config::specs() {
            if let Some(section) = &spec.section {
                // The file leaves unset keys out; the owner's type writes them as null.
                let mut own = (section.defaults)();
                if let Some(table) = own.as_object_mut() {
                    table.retain(|_, v| !v.is_null());
                }
                defaults[section.name] = own;
                assert!(
                    c.sections.contains_key(section.name),
                    "[{}] is in the example",
                    section.name
                );
            }
        }
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            defaults,
            "config/herald.example.toml sets a value that is not the default"
        );
        assert_eq!(c.provider_kind(), ProviderKind::None);
        for section in [
            "[server]",
            "[store]",
            "[llm]",
            "[agent]",
            "[lanes]",
            "[inbox]",
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
    fn lanes_max_attempts_is_an_alias_of_inbox_max_attempts() {
        let c = from_toml("[lanes]\nmax_attempts = 5").unwrap();
        assert_eq!((c.inbox.max_attempts, c.lanes.max_attempts), (5, None));
        let c = from_toml("[inbox]\nmax_attempts = 4").unwrap();
        assert_eq!(c.inbox.max_attempts, 4);
        assert_eq!(from_toml("").unwrap().inbox.max_attempts, 3);
        let e = from_toml("[inbox]\nmax_attempts = 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("inbox.max_attempts"), "{e}");
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
                "[llm]\nprovider = \"auto\"\nmodel = \"m\"",
                "llm.base_url",
            ),
            ("[llm]\nprovider = \"anthropic\"", "llm.model"),
            ("[llm]\nprovider = \"opneai\"", "opneai"),
            (
                "[[llm.fallbacks]]\nprovider = \"echo\"\nbase_url = \"http://h/v1\"\nmodel = \"m\"",
                "llm.fallbacks: entry 0: provider must name",
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
            // URLs are parsed on load: the error names the key even where the value is unused.
            (
                "[telemetry]\notlp_endpoint = \"not a url\"",
                "telemetry.otlp_endpoint",
            ),
            (
                "[telemetry]\notlp_endpoint = \"ftp://h\"",
                "telemetry.otlp_endpoint: \"ftp://h\" is not an http(s) URL",
            ),
            ("[memory.provider]\nurl = \"recall\"", "memory.provider.url"),
            ("[telegram]\nwebhook_url = \"/hook\"", "telegram.webhook_url"),
            (
                "[[llm.fallbacks]]\nbase_url = \"nowhere\"\nmodel = \"m\"",
                "llm.fallbacks",
            ),
            (
                "[[mcp.servers]]\nname = \"shop\"\nurl = \"shop\"",
                "mcp.servers",
            ),
            (
                "[[cron.jobs]]\nname = \"m\"\nschedule = \"every 1h\"\nprompt = \"p\"\n\
                 deliver = [\"irc:1\"]",
                "cron.jobs[0].deliver: cron job \"m\": unknown platform \"irc\"",
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
        })
        .unwrap();
        assert_eq!(
            c.llm.base_url.as_ref().map(ConfigUrl::as_str),
            Some("http://127.0.0.1:9/v1")
        );
        assert_eq!(c.llm.api_key.as_ref().unwrap().expose(), "sk-x");
        assert_eq!(c.llm.model.as_deref(), Some("mine"));
        assert_eq!(c.telegram.token.as_ref().unwrap().expose(), "1:abc");
    }

    #[test]
    fn variables_named_by_env_keys_are_found_at_any_depth() {
        let fig = Figment::from(Toml::string(
            "[[api.keys]]\nname = \"a\"\nkey_env = \"HERALD_API_KEY_LAPTOP\"\n\
             [x]\npassword_env = \" HERALD_PW \"\nenv_not = \"HERALD_NO\"\n\
             [y.z]\ntoken_env = \"TOKEN_VAR\"\nsecret_env = 5\n",
        ));
        assert_eq!(
            named_variables(&fig).unwrap(),
            vec!["HERALD_API_KEY_LAPTOP", "HERALD_PW", "TOKEN_VAR"]
        );
        assert_eq!(
            strip_prefix_ignore_case("herald_Api", "HERALD_"),
            Some("Api")
        );
        assert_eq!(strip_prefix_ignore_case("HERAL", "HERALD_"), None);
    }

    #[test]
    fn ids_may_be_numbers_or_strings() {
        let c = from_toml("[telegram]\nallowed_users = [12, \"34\"]").unwrap();
        assert_eq!(c.telegram.allowed_users, vec!["12", "34"]);
    }
}
