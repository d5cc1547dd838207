//! `[[agents]]` and `[[bindings]]`: several agents in one gateway, each with its own model,
//! prompt, tools, memory and budget, and the rules that route a conversation to one of them.
//!
//! `[agent]` and `[llm]` stay the default agent (named [`DEFAULT_AGENT`]); an `[[agents]]`
//! table names what differs from it and inherits the rest. [`Config::for_agent`] makes that
//! agent's whole configuration, so every part of a turn keeps reading one `Config`. The
//! runtime registry (routing, the live swap on reload) is `crate::agent::roster`. Must not: carry the
//! default model's key to another endpoint (an agent that names its own provider or base URL
//! brings its own key, or its preset's variable fills it).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Config, ConfigUrl, ProviderKind, Secret};

/// The name of the agent `[agent]` and `[llm]` describe.
pub const DEFAULT_AGENT: &str = "default";

/// Which tools an agent is offered: globs over tool names (`memory`, `github__*`). An empty
/// `allow` allows every tool; `deny` wins over `allow`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolFilter {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// An agent's own caps, on top of `[budget]`'s (which count every agent's spending).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentBudget {
    /// All of this agent's spending of one day.
    pub daily: Option<f64>,
    /// One person's spending with this agent in one day.
    pub person_daily: Option<f64>,
}

/// One `[[agents]]` table, as written. Unset keys inherit the default agent's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentSpec {
    pub name: String,
    /// One line shown by `/agent` and `herald doctor`.
    pub description: Option<String>,
    /// A preset or `echo`; with `base_url`, this agent talks to its own endpoint.
    pub provider: Option<ProviderKind>,
    pub base_url: Option<ConfigUrl>,
    pub api_key: Option<Secret>,
    pub model: Option<String>,
    pub context_window: Option<u64>,
    pub vision: Option<bool>,
    pub soul_file: Option<PathBuf>,
    pub system_message: Option<String>,
    pub context_files: Option<Vec<PathBuf>>,
    pub skills_dir: Option<PathBuf>,
    pub max_iterations: Option<u32>,
    pub tools: ToolFilter,
    /// The MCP servers (by name) whose tools this agent is offered; unset: all of them.
    pub mcp_servers: Option<Vec<String>>,
    /// Per-person memory for this agent (its own files, under `<data-dir>/agents/<name>/memory`).
    pub memory: Option<bool>,
    pub budget: AgentBudget,
    pub streaming: Option<bool>,
    /// A person may switch a private chat to this agent with `/agent NAME`.
    pub switchable: bool,
    /// Who may use this agent through `/agent` (`[[people]]` names or `platform:id`); empty:
    /// everyone the allowlists admit. Bindings route regardless.
    pub people: Vec<String>,
    /// The variable that filled `api_key` (set by the loader, never read from the file).
    #[serde(skip)]
    pub api_key_from: Option<&'static str>,
}

/// One `[[bindings]]` table: conversations matching every key set here go to `agent`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Binding {
    pub agent: String,
    pub platform: Option<String>,
    /// A chat or channel id on the platform.
    #[serde(alias = "channel")]
    pub chat: Option<String>,
    pub thread: Option<String>,
    /// `private` (a DM) or `group` (groups, channels and their threads).
    pub chat_type: Option<String>,
    /// A `[[people]]` name or an identity (`telegram:42`).
    pub person: Option<String>,
}

impl Binding {
    /// How specific this binding is: a person beats a thread, a thread a chat, a chat a chat
    /// type, a chat type a platform. Compared as a tuple, most significant first.
    pub fn specificity(&self) -> (bool, bool, bool, bool, bool) {
        (
            self.person.is_some(),
            self.thread.is_some(),
            self.chat.is_some(),
            self.chat_type.is_some(),
            self.platform.is_some(),
        )
    }

    /// The binding as one line (`platform=telegram chat=42 → coder`).
    pub fn describe(&self) -> String {
        let mut keys = Vec::new();
        for (k, v) in [
            ("platform", &self.platform),
            ("chat", &self.chat),
            ("thread", &self.thread),
            ("chat_type", &self.chat_type),
            ("person", &self.person),
        ] {
            if let Some(v) = v {
                keys.push(format!("{k}={v}"));
            }
        }
        if keys.is_empty() {
            keys.push("everything".into());
        }
        format!("{} → {}", keys.join(" "), self.agent)
    }
}

impl Config {
    /// The names of every agent: the default first, then `[[agents]]` in file order.
    pub fn agent_names(&self) -> Vec<String> {
        std::iter::once(DEFAULT_AGENT.to_string())
            .chain(self.agents.iter().map(|a| a.name.clone()))
            .collect()
    }

    /// The whole configuration agent `name` runs on: this one, with that agent's keys in
    /// place of the default's. `None` for an unknown name; the default's is a clone.
    pub fn for_agent(&self, name: &str) -> Option<Config> {
        if name == DEFAULT_AGENT {
            return Some(self.clone());
        }
        let spec = self.agents.iter().find(|a| a.name == name)?;
        let mut c = self.clone();
        let own_endpoint = spec.provider.is_some() || spec.base_url.is_some();
        if own_endpoint {
            c.llm.provider = spec.provider.unwrap_or(ProviderKind::Auto);
            c.llm.base_url = spec.base_url.clone();
            c.llm.api_key = spec.api_key.clone();
            c.llm.api_key_from = spec.api_key_from;
            c.llm.fallbacks.clear();
            c.llm.context_window = None;
        } else if spec.api_key.is_some() {
            c.llm.api_key = spec.api_key.clone();
            c.llm.api_key_from = None;
        }
        if let Some(m) = &spec.model {
            c.llm.model = Some(m.clone());
            if !own_endpoint && c.llm.context_window.is_some() && spec.context_window.is_none() {
                // Another model's window is not this one's: ask the provider.
                c.llm.context_window = None;
            }
        }
        set(&mut c.llm.context_window, spec.context_window.map(Some));
        set(&mut c.llm.vision, spec.vision);
        set(&mut c.agent.soul_file, spec.soul_file.clone().map(Some));
        set(
            &mut c.agent.system_message,
            spec.system_message.clone().map(Some),
        );
        set(&mut c.agent.context_files, spec.context_files.clone());
        set(&mut c.agent.skills_dir, spec.skills_dir.clone().map(Some));
        set(&mut c.agent.max_iterations, spec.max_iterations);
        set(&mut c.memory.enabled, spec.memory);
        c.memory.dir = Some(agent_dir(self, name).join("memory"));
        set(&mut c.streaming.enabled, spec.streaming.map(Some));
        if let Some(servers) = &spec.mcp_servers {
            c.mcp.servers.retain(|s| servers.contains(&s.name));
        }
        Some(c)
    }

    /// The `[[agents]]` table of `name` (`None` for the default agent and unknown names).
    pub fn agent_spec(&self, name: &str) -> Option<&AgentSpec> {
        self.agents.iter().find(|a| a.name == name)
    }
}

/// Where agent `name` keeps what is its own on disk (memory): `<data-dir>/agents/<name>`.
pub fn agent_dir(config: &Config, name: &str) -> PathBuf {
    config.server.data_dir.join("agents").join(name)
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

/// Checks `[[agents]]` and `[[bindings]]`; the error names the key.
pub fn check_agents(c: &Config) -> Result<(), (String, String)> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, a) in c.agents.iter().enumerate() {
        let key = |k: &str| format!("agents[{i}].{k}");
        if a.name == DEFAULT_AGENT {
            return Err((
                key("name"),
                format!("{DEFAULT_AGENT:?} is the agent of [agent] and [llm]; pick another name"),
            ));
        }
        if !super::safe_segment(&a.name) || a.name.len() > 64 {
            return Err((
                key("name"),
                format!(
                    "{:?} must be 1-64 characters from A-Z a-z 0-9 . _ - (not starting with a dot)",
                    a.name
                ),
            ));
        }
        if !seen.insert(a.name.as_str()) {
            return Err((key("name"), format!("{:?} is used twice", a.name)));
        }
        for g in a.tools.allow.iter().chain(&a.tools.deny) {
            if globset::Glob::new(g).is_err() {
                return Err((key("tools"), format!("{g:?} is not a glob")));
            }
        }
        if let Some(servers) = &a.mcp_servers {
            if let Some(s) = servers
                .iter()
                .find(|s| !c.mcp.servers.iter().any(|m| &m.name == *s))
            {
                return Err((
                    key("mcp_servers"),
                    format!("{s:?} is no [[mcp.servers]] name"),
                ));
            }
        }
        for (k, v) in [
            ("budget.daily", a.budget.daily),
            ("budget.person_daily", a.budget.person_daily),
        ] {
            if v.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                return Err((key(k), "must be a positive amount".into()));
            }
        }
        let derived = c.for_agent(&a.name).expect("listed");
        if let Err(e) = super::validate::llm_of(&derived) {
            return Err((key("model"), e.to_string()));
        }
    }
    for (i, b) in c.bindings.iter().enumerate() {
        let key = |k: &str| format!("bindings[{i}].{k}");
        if b.agent != DEFAULT_AGENT && !seen.contains(b.agent.as_str()) {
            return Err((
                key("agent"),
                format!(
                    "{:?} is no [[agents]] name (nor {DEFAULT_AGENT:?})",
                    b.agent
                ),
            ));
        }
        if let Some(p) = &b.platform {
            if crate::domain::Platform::parse(p)
                .and_then(super::spec)
                .is_none()
            {
                return Err((
                    key("platform"),
                    format!("{p:?} is no platform this build runs"),
                ));
            }
        }
        if let Some(t) = &b.chat_type {
            if t != "private" && t != "group" {
                return Err((
                    key("chat_type"),
                    format!("{t:?}: use \"private\" or \"group\""),
                ));
            }
        }
        if b.thread.is_some() && b.chat.is_none() {
            return Err((
                key("thread"),
                "a thread is named within its chat: set chat too".into(),
            ));
        }
    }
    Ok(())
}

/// Fills each agent's unset base URL from its preset and (with `get`) its unset key from the
/// preset's variable, as `[llm]`'s fallbacks are filled.
pub(crate) fn fill_agents(c: &mut Config, get: Option<super::providers::EnvLookup<'_>>) {
    for a in c.agents.iter_mut().filter(|a| a.provider.is_some()) {
        let mut e = super::Endpoint {
            provider: a.provider,
            base_url: a.base_url.take(),
            api_key: a.api_key.take(),
            model: String::new(),
            api_key_from: a.api_key_from,
        };
        super::providers::fill_endpoint(&mut e, get);
        (a.base_url, a.api_key, a.api_key_from) = (e.base_url, e.api_key, e.api_key_from);
    }
}
