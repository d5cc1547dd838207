//! The roster: several agents in one gateway, the registry of agents the configuration describes, and
//! which one serves a conversation.
//!
//! An [`Agent`] is one agent's whole configuration (`Config::for_agent`: the default's with
//! its own keys in place), its model chain and its tool filter. [`Agents`] is one generation of
//! them with the `[[bindings]]`; [`LiveAgents`] holds the current generation and swaps in a new
//! one when the configuration is reloaded. A turn reads the live generation once, at its start
//! ([`LiveAgents::for_turn`]), and runs on that agent to its end: a reload never changes a turn
//! in flight, and the next turn sees the new configuration. Must not: let a lane's `/agent`
//! choice pick an agent the person may not use, or one that is not switchable.

mod route;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use globset::{Glob, GlobSet, GlobSetBuilder};

use crate::agent::tools::{Origin, Tool, Tools};
use crate::budget::{Budget, BudgetEvents};
use crate::config::{Binding, Config, DEFAULT_AGENT};
use crate::domain::{LaneKey, MessageEvent};
use crate::llm::ProviderChain;
use crate::store::Store;

pub use route::{choice_key, route};

/// What every agent of every generation shares: the store its spending is written to and who
/// hears of caps.
#[derive(Clone)]
pub struct Shared {
    pub store: Arc<dyn Store>,
    pub events: Option<Arc<dyn BudgetEvents>>,
}

impl Shared {
    /// A budget over `config`'s prices and caps, on the shared ledger.
    fn budget(&self, config: &Config) -> Arc<Budget> {
        let b = Budget::new(config, self.store.clone());
        if let Some(e) = &self.events {
            b.set_events(e.clone());
        }
        b
    }
}

/// One agent: its configuration, its model chain, its budget (prices and caps as of its
/// generation, on the shared ledger) and the tools it is offered.
pub struct Agent {
    pub name: String,
    pub config: Arc<Config>,
    pub chain: ProviderChain,
    pub budget: Arc<Budget>,
    allow: Option<GlobSet>,
    deny: GlobSet,
    /// The MCP servers whose tools it is offered (`None`: all).
    mcp_servers: Option<Vec<String>>,
}

impl Agent {
    /// Agent `name` of `config` (`None` for an unknown name).
    pub fn build(config: &Config, name: &str, shared: &Shared) -> Result<Option<Agent>, String> {
        let Some(derived) = config.for_agent(name) else {
            return Ok(None);
        };
        let chain = crate::llm::main_chain(&derived).map_err(|e| format!("agent {name}: {e}"))?;
        let spec = config.agent_spec(name);
        let globs = |list: &[String]| -> Result<GlobSet, String> {
            let mut b = GlobSetBuilder::new();
            for g in list {
                b.add(Glob::new(g).map_err(|e| format!("agent {name}: tools: {e}"))?);
            }
            b.build().map_err(|e| format!("agent {name}: tools: {e}"))
        };
        let (allow, deny) = match spec {
            Some(s) if !s.tools.allow.is_empty() => {
                (Some(globs(&s.tools.allow)?), globs(&s.tools.deny)?)
            }
            Some(s) => (None, globs(&s.tools.deny)?),
            None => (None, GlobSet::empty()),
        };
        Ok(Some(Agent {
            name: name.to_string(),
            budget: shared.budget(&derived),
            chain,
            allow,
            deny,
            mcp_servers: spec.and_then(|s| s.mcp_servers.clone()),
            config: Arc::new(derived),
        }))
    }

    /// Whether this agent is offered `tool`.
    pub fn offers(&self, tool: &dyn Tool) -> bool {
        let name = tool.spec().name;
        // An agent with `memory = false` keeps no memory: the tool is not offered at all.
        if name == "memory" && !self.config.memory.enabled {
            return false;
        }
        if let (Origin::Mcp(server), Some(servers)) = (tool.origin(), &self.mcp_servers) {
            if !servers.contains(&server) {
                return false;
            }
        }
        self.allow.as_ref().is_none_or(|a| a.is_match(&name)) && !self.deny.is_match(&name)
    }

    /// Whether the prompt guidance labelled `label` (`tool guidance (mcp:NAME)`) is about a
    /// server this agent is offered.
    pub fn offers_guidance(&self, label: &str) -> bool {
        let server = label
            .strip_prefix("tool guidance (mcp:")
            .and_then(|l| l.strip_suffix(')'));
        match (server, &self.mcp_servers) {
            (Some(s), Some(servers)) => servers.iter().any(|n| n == s),
            _ => true,
        }
    }

    /// `tools` without what this agent is not offered.
    pub fn tools(&self, tools: &Tools) -> Tools {
        tools.without(|t| !self.offers(t))
    }

    pub fn is_default(&self) -> bool {
        self.name == DEFAULT_AGENT
    }

    /// The one line `/agent` and `herald doctor` show for it.
    pub fn description(&self) -> String {
        let model = self.chain.primary_name();
        match self
            .config
            .agent_spec(&self.name)
            .and_then(|s| s.description.clone())
        {
            Some(d) => format!("{d} ({model})"),
            None => model,
        }
    }
}

/// One generation of agents, with the bindings that route conversations to them.
pub struct Agents {
    default: Arc<Agent>,
    named: BTreeMap<String, Arc<Agent>>,
    bindings: Vec<Binding>,
    config: Arc<Config>,
}

impl Agents {
    /// Every agent of `config`, the default first.
    pub fn build(config: Arc<Config>, shared: &Shared) -> Result<Agents, String> {
        let default =
            Agent::build(&config, DEFAULT_AGENT, shared)?.expect("the default agent exists");
        let mut named = BTreeMap::new();
        for spec in &config.agents {
            if let Some(a) = Agent::build(&config, &spec.name, shared)? {
                named.insert(spec.name.clone(), Arc::new(a));
            }
        }
        Ok(Agents {
            default: Arc::new(default),
            named,
            bindings: config.bindings.clone(),
            config,
        })
    }

    pub fn default_agent(&self) -> &Arc<Agent> {
        &self.default
    }

    /// Agent `name`, the default included.
    pub fn get(&self, name: &str) -> Option<&Arc<Agent>> {
        match name {
            DEFAULT_AGENT => Some(&self.default),
            _ => self.named.get(name),
        }
    }

    /// Every agent, the default first.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Agent>> {
        std::iter::once(&self.default).chain(self.named.values())
    }

    /// The agent the bindings give `ev` (the default when none matches).
    pub fn bound(&self, ev: &MessageEvent) -> &Arc<Agent> {
        route(&self.bindings, &self.config.people, ev)
            .and_then(|name| self.get(name))
            .unwrap_or(&self.default)
    }

    /// Whether the sender of `ev` may switch to `agent` with `/agent`.
    pub fn may_switch(&self, agent: &Agent, ev: &MessageEvent) -> bool {
        if agent.is_default() {
            return true;
        }
        let Some(spec) = self.config.agent_spec(&agent.name) else {
            return false;
        };
        if !spec.switchable {
            return false;
        }
        spec.people.is_empty() || route::person_matches(&spec.people, &self.config.people, ev)
    }

    /// The agents `ev`'s sender may switch to, the default first.
    pub fn switchable_for(&self, ev: &MessageEvent) -> Vec<&Arc<Agent>> {
        self.all().filter(|a| self.may_switch(a, ev)).collect()
    }

    /// The agent for a turn of `ev`: the lane's `/agent` choice when it is still one the
    /// person may switch to, else the bindings'.
    pub fn resolve(&self, ev: &MessageEvent, choice: Option<&str>) -> Arc<Agent> {
        if let Some(a) = choice.and_then(|c| self.get(c)) {
            if self.may_switch(a, ev) {
                return a.clone();
            }
        }
        self.bound(ev).clone()
    }
}

/// The current generation of agents, swapped whole by a reload.
pub struct LiveAgents {
    current: RwLock<Arc<Agents>>,
    shared: Shared,
}

impl LiveAgents {
    /// The first generation, its default agent on `chain` (the one the start built and
    /// warned about).
    pub fn start(
        config: Arc<Config>,
        chain: ProviderChain,
        shared: Shared,
    ) -> Result<LiveAgents, String> {
        let mut agents = Agents::build(config, &shared)?;
        let mut d = Agent::build(&agents.config, DEFAULT_AGENT, &shared)?.expect("default");
        d.chain = chain;
        agents.default = Arc::new(d);
        Ok(LiveAgents {
            current: RwLock::new(Arc::new(agents)),
            shared,
        })
    }

    /// The generation now (a turn keeps what it read to its end).
    pub fn current(&self) -> Arc<Agents> {
        self.current.read().expect("agents lock").clone()
    }

    /// Takes a reloaded configuration: every agent rebuilt, then swapped in at once.
    pub fn replace(&self, config: Arc<Config>) -> Result<(), String> {
        let next = Agents::build(config, &self.shared)?;
        *self.current.write().expect("agents lock") = Arc::new(next);
        Ok(())
    }

    /// The agent that serves the next turn of `lane` (the lane's `/agent` choice is a `kv`
    /// row; a store that cannot be read leaves the bindings to decide).
    pub async fn for_turn(
        &self,
        store: &dyn Store,
        lane: &LaneKey,
        ev: &MessageEvent,
    ) -> Arc<Agent> {
        let agents = self.current();
        let choice = match store.kv_get(&choice_key(lane)).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(lane = %lane, error = %e, "reading the lane's /agent choice failed; routing by bindings");
                None
            }
        };
        agents.resolve(ev, choice.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::memory::tool::MemoryTool;
    use crate::agent::memory::MemoryFiles;
    use crate::config::AgentSpec;

    #[tokio::test]
    async fn an_agent_without_memory_is_not_offered_the_memory_tool() {
        let shared = Shared {
            store: crate::store::connect("sqlite::memory:", 1).await.unwrap(),
            events: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.server.data_dir = dir.path().to_path_buf();
        config.agents = vec![
            AgentSpec {
                name: "quiet".into(),
                memory: Some(false),
                ..AgentSpec::default()
            },
            AgentSpec {
                name: "chatty".into(),
                ..AgentSpec::default()
            },
        ];
        let tool = MemoryTool {
            files: MemoryFiles::from_config(&config),
            people: Vec::new(),
            agents: crate::agent::memory::tool::agent_files(&config),
            roster: None,
        };
        let offered = |name: &str| {
            let agent = Agent::build(&config, name, &shared).unwrap().unwrap();
            agent.offers(&tool)
        };
        assert!(offered(DEFAULT_AGENT) && offered("chatty"));
        assert!(!offered("quiet"));
        // Only agents that keep memory have files of their own.
        assert_eq!(
            tool.agents.keys().collect::<Vec<_>>(),
            [&"chatty".to_string()]
        );
    }
}
