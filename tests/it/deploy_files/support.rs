//! Helpers for tests/it/deploy_files.rs: reading repo files, YAML as JSON, and building a
//! `Config` the way the daemon does from a TOML file plus `HERALD_*` variables.

use std::path::{Path, PathBuf};

use figment::providers::{Format, Serialized, Toml};
use figment::Figment;
use herald::config::{Config, Endpoint, HintMode, HintTable, Person};
use serde_json::Value;

/// The one image name our deploy files may use for Herald; `docker build -t` in the docs and
/// the Dockerfile header use the same tag.
pub fn herald_image() -> String {
    format!("herald:{}", env!("CARGO_PKG_VERSION"))
}

pub const POSTGRES_IMAGE: &str = "postgres:16-bookworm";

pub fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

pub fn read(rel: &str) -> String {
    std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// Every YAML document in the file, merge keys (`<<: *anchor`) applied, as JSON values.
pub fn yaml_docs(rel: &str) -> Vec<Value> {
    let text = read(rel);
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| {
            let mut v: serde_norway::Value = serde::Deserialize::deserialize(doc)
                .unwrap_or_else(|e| panic!("{rel} is not valid YAML: {e}"));
            v.apply_merge()
                .unwrap_or_else(|e| panic!("{rel}: bad merge key: {e}"));
            serde_json::to_value(v).unwrap_or_else(|e| panic!("{rel}: {e}"))
        })
        .collect()
}

/// Dotted paths of every configuration key, from the defaults themselves, plus the keys of
/// list and map items (`llm.fallbacks[].model`, `agent.platform_hints.<platform>.text`).
pub fn config_key_paths() -> Vec<String> {
    let mut out = Vec::new();
    let root = defaults();
    for (section, body) in root.as_object().expect("config is a table") {
        // A top-level list of tables (`[[people]]`): its item keys are added below.
        if body.is_array() {
            continue;
        }
        for (key, v) in body.as_object().expect("each section is a table") {
            // A nested table with keys of its own (`[memory.provider]`): one row per key.
            match v.as_object().filter(|o| !o.is_empty()) {
                Some(sub) => out.extend(sub.keys().map(|k| format!("{section}.{key}.{k}"))),
                None => out.push(format!("{section}.{key}")),
            }
        }
    }
    let person = serde_json::to_value(Person::default()).expect("person serializes");
    for key in person.as_object().expect("person is a table").keys() {
        out.push(format!("people[].{key}"));
    }
    let endpoint = serde_json::to_value(Endpoint::default()).expect("endpoint serializes");
    for key in endpoint.as_object().expect("endpoint is a table").keys() {
        out.push(format!("llm.fallbacks[].{key}"));
    }
    // A hint is a bare string or a table of these keys (`append`, `replace`, `mode`, `text`).
    let hint = HintTable {
        append: Some(String::new()),
        replace: Some(String::new()),
        mode: Some(HintMode::Append),
        text: Some(String::new()),
    };
    let hint = serde_json::to_value(hint).expect("hint serializes");
    for key in hint.as_object().expect("hint is a table").keys() {
        out.push(format!("agent.platform_hints.<platform>.{key}"));
    }
    out
}

/// The sections platforms own (`[slack]`): `Config` keeps them as unread tables, so their
/// defaults come from the owning adapter's own type.
type SectionDefault = fn() -> Value;
const PLATFORM_SECTIONS: &[(&str, SectionDefault)] = &[("slack", || {
    serde_json::to_value(herald::adapters::slack::config::SlackConfig::default())
        .expect("the slack section serializes")
})];

/// `Config::default()` as JSON, with the platform sections' defaults in place.
fn defaults() -> Value {
    let mut root = serde_json::to_value(Config::default()).expect("config serializes");
    let table = root.as_object_mut().expect("config is a table");
    for (name, default) in PLATFORM_SECTIONS {
        table.insert((*name).to_string(), default());
    }
    root
}

/// The default of a top-level key, written as the configuration reference writes it.
pub fn default_text(path: &str) -> Option<String> {
    let root = defaults();
    let mut v = &root;
    for part in path.split('.') {
        v = v.get(part)?;
    }
    Some(match v {
        Value::Null => "unset".into(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) if a.is_empty() => "[]".into(),
        Value::Object(o) if o.is_empty() => "{}".into(),
        other => other.to_string(),
    })
}

/// `HERALD_SERVER__DATA_DIR` → `server.data_dir`, as figment's `Env::prefixed("HERALD_")
/// .split("__")` maps it.
pub fn env_to_path(name: &str) -> Option<String> {
    let rest = name.strip_prefix("HERALD_")?;
    Some(rest.to_ascii_lowercase().replace("__", "."))
}

pub fn path_to_env(path: &str) -> String {
    format!("HERALD_{}", path.to_ascii_uppercase().replace('.', "__"))
}

/// Checks that `HERALD_*` names a real key; the CLI's own variables (`HERALD_CONFIG`) are the
/// loader's list of exceptions.
pub fn check_herald_var(name: &str, known: &[String]) -> Result<(), String> {
    if herald::config::CLI_ENV.contains(&name) {
        return Ok(());
    }
    let path = env_to_path(name).ok_or_else(|| format!("{name} is not a HERALD_ variable"))?;
    if known.contains(&path) {
        Ok(())
    } else {
        Err(format!(
            "{name} maps to {path}, which is not a configuration key"
        ))
    }
}

/// Non-Herald variables the daemon reads; each must appear as a string literal in `src/`.
pub const CONVENTIONAL_VARS: &[&str] = &[
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "TELEGRAM_BOT_TOKEN",
    "DISCORD_BOT_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_MODEL",
];

pub fn all_source() -> String {
    let mut text = String::new();
    let mut stack = vec![repo("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                text.push_str(&std::fs::read_to_string(&path).expect("source is UTF-8"));
            }
        }
    }
    text
}

/// Builds the config the daemon would see: defaults, then the TOML, then `HERALD_*` values
/// (parsed the way figment's Env provider parses them), then validation.
pub fn config_from(toml: Option<&str>, env: &[(String, String)]) -> Result<Config, String> {
    let mut fig = Figment::from(Serialized::defaults(Config::default()));
    if let Some(t) = toml {
        fig = fig.merge(Toml::string(t));
    }
    for (name, value) in env {
        if herald::config::CLI_ENV.contains(&name.as_str()) {
            continue;
        }
        let Some(path) = env_to_path(name) else {
            continue;
        };
        let parsed: figment::value::Value = value.parse().expect("figment parsing is infallible");
        fig = fig.merge(Serialized::default(&path, parsed));
    }
    let config: Config = fig.extract().map_err(|e| e.to_string())?;
    herald::config::validate(&config).map_err(|e| e.to_string())?;
    Ok(config)
}

/// Compose-style interpolation: `${X:-default}` → default, `${X:?msg}` (required) → a
/// placeholder, `${X}` → empty.
pub fn interpolate(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').expect("unclosed ${ in compose file");
        let expr = &after[..end];
        if let Some((_, default)) = expr.split_once(":-") {
            out.push_str(default);
        } else if expr.contains(":?") {
            out.push_str("placeholder-required-value");
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The port of a `host:port` listen address.
pub fn port_of(listen: &str) -> u16 {
    listen
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("{listen:?} has no port"))
}

/// `ENV` instructions of a Dockerfile (continuations joined), as name/value pairs.
pub fn dockerfile_env(text: &str) -> Vec<(String, String)> {
    let joined = text.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        let Some(rest) = line.trim().strip_prefix("ENV ") else {
            continue;
        };
        for pair in rest.split_whitespace() {
            let (k, v) = pair
                .split_once('=')
                .unwrap_or_else(|| panic!("ENV {pair:?} is not KEY=VALUE"));
            out.push((k.to_string(), v.to_string()));
        }
    }
    out
}
