//! The `[agent]` section: what goes into the system prompt (identity, operator instructions,
//! context files, skills, platform hints) and the limits of one turn.
//!
//! Platform hints are read leniently on purpose: a malformed entry must never stop the daemon
//! or leak into another platform's prompt, so it parses into [`HintEntry::Malformed`], is
//! reported once at start, and the built-in hint is used instead.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HintMode {
    Append,
    Replace,
}

/// A resolved platform hint override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlatformHint {
    pub mode: HintMode,
    pub text: String,
}

/// One `agent.platform_hints.<platform>` entry as written: a bare string (shorthand for
/// append), a table with `append` and/or `replace` (replace wins), or the older
/// `{ mode, text }` table. Anything else is kept as malformed and ignored.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HintEntry {
    Text(String),
    Table(HintTable),
    Malformed(serde_json::Value),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HintTable {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<HintMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl HintEntry {
    pub fn append(text: impl Into<String>) -> HintEntry {
        HintEntry::Text(text.into())
    }

    pub fn replace(text: impl Into<String>) -> HintEntry {
        HintEntry::Table(HintTable {
            replace: Some(text.into()),
            ..HintTable::default()
        })
    }

    /// The override this entry means, or `None` when it is malformed.
    pub fn resolve(&self) -> Option<PlatformHint> {
        let hint = |mode, text: &str| {
            Some(PlatformHint {
                mode,
                text: text.to_string(),
            })
        };
        match self {
            HintEntry::Text(t) => hint(HintMode::Append, t),
            HintEntry::Table(t) => match (&t.replace, &t.append, t.mode, &t.text) {
                (Some(r), _, None, None) => hint(HintMode::Replace, r),
                (None, Some(a), None, None) => hint(HintMode::Append, a),
                (None, None, Some(mode), Some(text)) => hint(mode, text),
                _ => None,
            },
            HintEntry::Malformed(_) => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// Identity file (SOUL.md style); a built-in identity is used when unset or missing.
    pub soul_file: Option<PathBuf>,
    /// Operator instructions placed in the context tier.
    pub system_message: Option<String>,
    /// Files (e.g. `AGENTS.md`) whose text goes into the context tier of every new session, in
    /// this order, each screened and capped like the identity file.
    pub context_files: Vec<PathBuf>,
    /// Cap per identity or context file, in characters; unset scales with the model's window
    /// (one character per token of window, at least 20,000, at most 500,000).
    pub context_file_max_chars: Option<usize>,
    /// Where skills live (`<name>/SKILL.md`); unset means `<data-dir>/skills`.
    pub skills_dir: Option<PathBuf>,
    /// Offer `skill_manage`, with which the agent proposes skills for a person to approve
    /// (`herald skills approve`); only when the skills directory exists.
    pub skill_manage: bool,
    /// Model calls allowed in one turn before a final call with tools stripped.
    pub max_iterations: u32,
    /// Whole-turn deadline.
    pub turn_timeout_secs: u64,
    /// Per-platform hint overrides, keyed by platform name (`web`, `telegram`, `slack`, `cron`, …).
    pub platform_hints: BTreeMap<String, HintEntry>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            soul_file: None,
            system_message: None,
            context_files: Vec::new(),
            context_file_max_chars: None,
            skills_dir: None,
            skill_manage: true,
            max_iterations: 8,
            turn_timeout_secs: 300,
            platform_hints: BTreeMap::new(),
        }
    }
}

impl AgentConfig {
    /// The usable override for `platform`, if any.
    pub fn hint_for(&self, platform: &str) -> Option<PlatformHint> {
        self.platform_hints
            .get(platform)
            .and_then(HintEntry::resolve)
    }

    /// One line per entry that will be ignored (unknown platform or malformed), for the log
    /// at start and for `doctor`.
    pub fn hint_problems(&self) -> Vec<String> {
        self.platform_hints
            .iter()
            .filter_map(|(k, v)| {
                let known = super::registry::specs();
                if !known.iter().any(|s| s.name == k.as_str()) {
                    let names: Vec<&str> = known.iter().map(|s| s.name.as_str()).collect();
                    Some(format!(
                        "agent.platform_hints.{k}: unknown platform (use {}); ignored",
                        names.join(", ")
                    ))
                } else if v.resolve().is_none() {
                    Some(format!(
                        "agent.platform_hints.{k}: not a string, {{ append = … }}, {{ replace = … }} \
                         or {{ mode, text }}; the built-in hint is used"
                    ))
                } else {
                    None
                }
            })
            .collect()
    }

    /// The cap for one identity or context file, for a model with `window_tokens`.
    pub fn file_cap_chars(&self, window_tokens: usize) -> usize {
        self.context_file_max_chars
            .filter(|c| *c > 0)
            .unwrap_or_else(|| window_tokens.clamp(20_000, 500_000))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_entries_resolve_leniently() {
        let toml = r#"
            [agent.platform_hints]
            telegram = "Short messages."
            discord = { replace = "Discord only." , append = "ignored" }
            web = { append = "Also web." }
            cron = { mode = "replace", text = "Cron." }
            irc = "x"
        "#;
        let c = crate::config::from_toml(toml).expect("malformed hints never fail the load");
        let a = &c.agent;
        let got = |p: &str| a.hint_for(p).map(|h| (h.mode, h.text));
        assert_eq!(
            got("telegram"),
            Some((HintMode::Append, "Short messages.".into()))
        );
        assert_eq!(got("web"), Some((HintMode::Append, "Also web.".into())));
        assert_eq!(got("cron"), Some((HintMode::Replace, "Cron.".into())));
        // replace wins over append when both are there
        assert_eq!(
            got("discord"),
            Some((HintMode::Replace, "Discord only.".into()))
        );
        let problems = a.hint_problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("platform_hints.irc"), "{problems:?}");
        for bad in [
            "telegram = 42",
            "telegram = { color = \"red\" }",
            "telegram = [1, 2]",
        ] {
            let c = crate::config::from_toml(&format!("[agent.platform_hints]\n{bad}")).unwrap();
            assert_eq!(c.agent.hint_for("telegram"), None, "{bad}");
            assert_eq!(c.agent.hint_problems().len(), 1, "{bad}");
        }
    }
}
