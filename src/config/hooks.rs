//! `[[hooks]]`: inbound webhooks, one table per sender (a CI, a monitor, a form).
//!
//! Each hook is a route `POST /hooks/<name>` whose body is checked against the hook's own
//! secret (`signature`), filtered, and run like a cron fire: an agent turn over the rendered
//! prompt (`mode = "agent"`) or the rendered text alone, delivered without the model
//! (`mode = "notify"`). This file holds the table as written and its checks; the receiving
//! side is `crate::webhooks`. Must not: resolve `secret_env` here (the start does, once).

use serde::{Deserialize, Serialize};

use super::Secret;
use crate::domain::cron::{parse_target, Deliverable};
use crate::domain::Amount;

/// The default and the largest `max_body_bytes` (the server's own body cap is 1 MiB).
pub const DEFAULT_MAX_BODY: usize = 256 * 1024;
pub const MAX_BODY_CAP: usize = 1024 * 1024;

/// How a sender proves it holds the hook's secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignatureKind {
    /// GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>`.
    Github,
    /// Any sender: `X-Signature-256: <hex>` or `sha256=<hex>`, the same HMAC.
    HmacSha256,
    /// `Authorization: Bearer <secret>` (Alertmanager, most form services).
    Bearer,
}

/// What a delivery starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookMode {
    /// An agent turn: the rendered prompt, then the payload fenced as untrusted data.
    #[default]
    Agent,
    /// The rendered prompt is the message: delivered as it is, no model call.
    Notify,
}

/// One condition of a hook's `filter`: a payload path (`workflow_run.conclusion`) or a request
/// header (`X-GitHub-Event`) compared with `equals` or `one_of`. Every condition must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<String>>,
}

/// One `[[hooks]]` table, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Secret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
    pub signature: SignatureKind,
    #[serde(default)]
    pub mode: HookMode,
    /// A template: `{{payload.path.to.field}}` is replaced by that field of the JSON body.
    pub prompt: String,
    #[serde(default)]
    pub deliver: Vec<String>,
    /// The most one run may spend (`budget.cron_run` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Amount>,
    #[serde(default)]
    pub filter: Vec<FilterRule>,
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    #[serde(default = "default_rate")]
    pub rate_per_min: u32,
}

fn default_max_body() -> usize {
    DEFAULT_MAX_BODY
}

fn default_rate() -> u32 {
    60
}

impl HookSpec {
    /// The job name its runs are recorded under in the cron ledger and its lane
    /// (`cron:hook:<name>`): a config job name never holds a `:`, so none can collide.
    pub fn job(&self) -> String {
        job_name(&self.name)
    }

    /// The secret, from `secret` or the variable `secret_env` names (read once, at start).
    pub fn resolve_secret(&self) -> Result<Secret, String> {
        match (&self.secret, &self.secret_env) {
            (Some(s), None) => Ok(s.clone()),
            (None, Some(var)) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => Ok(Secret::new(v)),
                _ => Err(format!("the variable {var} is not set")),
            },
            _ => Err("set exactly one of secret and secret_env".into()),
        }
    }
}

/// The ledger job name of the hook `name`.
pub fn job_name(name: &str) -> String {
    format!("hook:{name}")
}

/// Every hook's rules; the error names the key (`hooks[1].deliver`).
pub fn check_hooks(hooks: &[HookSpec], cron_on: bool, known: &Deliverable) -> Result<(), String> {
    let mut names = std::collections::HashSet::new();
    for (i, h) in hooks.iter().enumerate() {
        let key = |k: &str, m: String| format!("hooks[{i}].{k}: {m}");
        let valid_name = !h.name.is_empty()
            && h.name.len() <= 64
            && h.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !valid_name {
            return Err(key(
                "name",
                "use 1-64 characters from A-Z a-z 0-9 . _ -".into(),
            ));
        }
        if !names.insert(h.name.as_str()) {
            return Err(key("name", format!("{:?} is used twice", h.name)));
        }
        if h.secret.is_some() == h.secret_env.is_some() {
            return Err(key(
                "secret",
                "set exactly one of secret and secret_env".into(),
            ));
        }
        if h.secret.as_ref().is_some_and(|s| s.expose().len() < 16) {
            return Err(key("secret", "use at least 16 characters".into()));
        }
        if h.prompt.trim().is_empty() {
            return Err(key("prompt", "must not be empty".into()));
        }
        if h.deliver.is_empty() {
            return Err(key("deliver", "name at least one target".into()));
        }
        let mut lanes = std::collections::HashSet::new();
        for t in &h.deliver {
            let target = parse_target(t, known).map_err(|e| key("deliver", e.to_string()))?;
            if !lanes.insert(target.lane_key()) {
                return Err(key("deliver", format!("{t:?} is listed twice")));
            }
        }
        if h.max_body_bytes == 0 || h.max_body_bytes > MAX_BODY_CAP {
            return Err(key(
                "max_body_bytes",
                format!("must be 1 to {MAX_BODY_CAP}"),
            ));
        }
        if h.rate_per_min == 0 {
            return Err(key("rate_per_min", "must be at least 1".into()));
        }
        for (j, r) in h.filter.iter().enumerate() {
            if r.path.is_some() == r.header.is_some() {
                return Err(key(
                    &format!("filter[{j}]"),
                    "set exactly one of path and header".into(),
                ));
            }
            if r.equals.is_some() == r.one_of.is_some() {
                return Err(key(
                    &format!("filter[{j}]"),
                    "set exactly one of equals and one_of".into(),
                ));
            }
        }
    }
    if !hooks.is_empty() && !cron_on {
        return Err(
            "hooks: webhook runs are recorded by the cron scheduler; set cron.enabled = true"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: serde_json::Value) -> HookSpec {
        let mut v = serde_json::json!({"name": "ci", "secret": "0123456789abcdef",
            "signature": "github", "prompt": "p", "deliver": ["web:a"]});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn each_bad_hook_is_refused_naming_its_key() {
        let known = crate::config::Config::default().deliverable();
        assert_eq!(
            check_hooks(&[spec(serde_json::json!({}))], true, &known),
            Ok(())
        );
        let cases = [
            (serde_json::json!({"name": "a b"}), "hooks[0].name"),
            (serde_json::json!({"secret": "short"}), "hooks[0].secret"),
            (serde_json::json!({"secret_env": "X"}), "hooks[0].secret"),
            (serde_json::json!({"deliver": []}), "hooks[0].deliver"),
            (
                serde_json::json!({"deliver": ["nowhere:1"]}),
                "hooks[0].deliver",
            ),
            (
                serde_json::json!({"max_body_bytes": 2_000_000}),
                "hooks[0].max_body_bytes",
            ),
            (
                serde_json::json!({"rate_per_min": 0}),
                "hooks[0].rate_per_min",
            ),
            (
                serde_json::json!({"filter": [{"path": "a"}]}),
                "hooks[0].filter[0]",
            ),
            (
                serde_json::json!({"filter": [{"path": "a", "header": "b", "equals": "c"}]}),
                "hooks[0].filter[0]",
            ),
        ];
        for (extra, key) in cases {
            let err = check_hooks(&[spec(extra.clone())], true, &known).unwrap_err();
            assert!(err.starts_with(key), "{extra}: {err}");
        }
        let twice = [spec(serde_json::json!({})), spec(serde_json::json!({}))];
        assert!(check_hooks(&twice, true, &known)
            .unwrap_err()
            .starts_with("hooks[1].name"));
        let err = check_hooks(&[spec(serde_json::json!({}))], false, &known).unwrap_err();
        assert!(err.contains("cron.enabled"), "{err}");
    }
}
