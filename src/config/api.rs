//! The `[api]` section: the OpenAI-compatible API (`/v1/models`, `/v1/chat/completions`,
//! `/v1/responses`) and its `[[api.keys]]`, each acting as one `[[people]]` person.
//!
//! Kept apart from `[web]`: the web token does not open these routes and an API key opens
//! nothing else, so the two sets of credentials are configured (and checked) apart.

use serde::{Deserialize, Serialize};

use super::{safe_segment, Config, Secret};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiConfig {
    /// Serve the OpenAI-compatible routes on `server.listen`. Off by default.
    pub enabled: bool,
    /// Take a `system` message of a request as operator context for the turn. Off: a
    /// `system` message is ignored (the agent keeps its own system prompt either way).
    pub accept_system: bool,
    /// Who may call the API, each with the person it acts as.
    pub keys: Vec<ApiKeyConfig>,
    /// Requests in flight at once per key (a body still uploading counts); one more is
    /// answered 429 `rate_limit_exceeded` with `Retry-After`.
    pub max_concurrent_per_key: usize,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            enabled: false,
            accept_system: false,
            keys: Vec::new(),
            max_concurrent_per_key: 8,
        }
    }
}

/// `[[api.keys]]`: one client's key.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// The key's name: part of its conversations' lane keys (`api:<name>:<conversation>`).
    pub name: String,
    /// The key itself (prefer `key_env`).
    pub key: Option<Secret>,
    /// An environment variable holding the key, read once at start.
    pub key_env: Option<String>,
    /// The `[[people]]` name this key acts as: memory, budgets and approvals are theirs.
    pub person: String,
}

/// A key with its value read, as the HTTP guard compares it.
#[derive(Clone)]
pub struct ApiKey {
    pub name: String,
    pub person: String,
    pub key: Secret,
}

/// Shortest key accepted: a guessable key opens a person's agent.
pub const MIN_KEY_CHARS: usize = 16;

impl ApiConfig {
    /// The keys with their values: `key`, else the variable `key_env` names (read now, once).
    pub fn resolve(&self) -> Result<Vec<ApiKey>, (String, String)> {
        self.keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let value = match (&k.key, &k.key_env) {
                    (Some(v), _) => v.clone(),
                    (None, Some(var)) => match std::env::var(var) {
                        Ok(v) if !v.trim().is_empty() => Secret::new(v.trim().to_string()),
                        _ => {
                            return Err((
                                format!("api.keys[{i}].key_env"),
                                format!("the environment variable {var} is not set or empty"),
                            ))
                        }
                    },
                    (None, None) => {
                        return Err((format!("api.keys[{i}]"), "set key or key_env".to_string()))
                    }
                };
                if value.expose().chars().count() < MIN_KEY_CHARS {
                    return Err((
                        format!("api.keys[{i}].key"),
                        format!("the key is shorter than {MIN_KEY_CHARS} characters"),
                    ));
                }
                Ok(ApiKey {
                    name: k.name.clone(),
                    person: k.person.clone(),
                    key: value,
                })
            })
            .collect()
    }

    /// The rules the section must satisfy: names are safe and unique, each key names a
    /// configured person, and both `key` and `key_env` are never set at once.
    pub fn check(&self, c: &Config) -> Result<(), (String, String)> {
        if self.enabled && self.keys.is_empty() {
            return Err((
                "api.keys".into(),
                "api.enabled needs at least one [[api.keys]] entry".into(),
            ));
        }
        for (i, k) in self.keys.iter().enumerate() {
            // The name is a lane-key segment: no `:` (it would shift the conversation part).
            if !safe_segment(&k.name) {
                return Err((
                    format!("api.keys[{i}].name"),
                    format!(
                        "{:?} must be 1-64 characters from A-Z a-z 0-9 . _ -",
                        k.name
                    ),
                ));
            }
            if self.keys[..i].iter().any(|o| o.name == k.name) {
                return Err((
                    format!("api.keys[{i}].name"),
                    format!("{:?} is used twice", k.name),
                ));
            }
            if k.key.is_some() && k.key_env.is_some() {
                return Err((
                    format!("api.keys[{i}]"),
                    "set key or key_env, not both".into(),
                ));
            }
            if !c.people.iter().any(|p| p.name == k.person) {
                return Err((
                    format!("api.keys[{i}].person"),
                    format!("{:?} is not a [[people]] name", k.person),
                ));
            }
        }
        Ok(())
    }
}

/// Links each key's identity (`api:<name>`) to its person, so that everything that asks who
/// a sender is (memory, recall, approvals) finds the person the key acts as.
pub fn link_api_keys(c: &mut Config) {
    for k in &c.api.keys {
        let id = format!("api:{}", k.name);
        if let Some(p) = c.people.iter_mut().find(|p| p.name == k.person) {
            if !p.ids.contains(&id) {
                p.ids.push(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Person;

    fn config(keys: Vec<ApiKeyConfig>) -> Config {
        let mut c = Config {
            people: vec![Person {
                name: "ana".into(),
                ids: vec!["telegram:7".into()],
            }],
            ..Config::default()
        };
        c.api.enabled = true;
        c.api.keys = keys;
        c
    }

    fn key(name: &str, person: &str, value: Option<&str>) -> ApiKeyConfig {
        ApiKeyConfig {
            name: name.into(),
            key: value.map(Secret::new),
            key_env: None,
            person: person.into(),
        }
    }

    #[test]
    fn rules_table() {
        let long = Some("0123456789abcdef");
        let cases: Vec<(Vec<ApiKeyConfig>, Option<&str>)> = vec![
            (vec![key("laptop", "ana", long)], None),
            (vec![], Some("api.keys")),
            (vec![key("lap:top", "ana", long)], Some("api.keys[0].name")),
            (
                vec![key("a", "ana", long), key("a", "ana", long)],
                Some("api.keys[1].name"),
            ),
            (vec![key("a", "bob", long)], Some("api.keys[0].person")),
        ];
        for (keys, want) in cases {
            let c = config(keys);
            let got = c.api.check(&c).err().map(|(k, _)| k);
            assert_eq!(got.as_deref(), want);
        }
        let c = config(vec![key("a", "ana", Some("short"))]);
        assert_eq!(c.api.resolve().err().unwrap().0, "api.keys[0].key");
        let c = config(vec![key("a", "ana", None)]);
        assert_eq!(c.api.resolve().err().unwrap().0, "api.keys[0]");
    }

    #[test]
    fn a_key_acts_as_its_person() {
        let mut c = config(vec![key("laptop", "ana", Some("0123456789abcdef"))]);
        link_api_keys(&mut c);
        link_api_keys(&mut c);
        assert_eq!(c.person("api", "laptop").as_deref(), Some("ana"));
        assert_eq!(c.people[0].ids, ["telegram:7", "api:laptop"]);
        assert!(crate::config::check_people(&c.people).is_ok());
    }
}
