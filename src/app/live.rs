//! The parts of a running app that take a reloaded configuration in place (`crate::reload`):
//! the allowlists (every `Authorizer` clone shares its rules), the `[[hooks]]` receivers, the
//! cron jobs of the file (stored again, as at start, and the scheduler poked), the MCP servers
//! (`McpManager::apply`), the adapters (`adapters::running`) and the approvals' people
//! (`live_parts.rs`). This file only wires; each part's logic lives with what it changes.
//! Whatever else changed is reported as needing a restart by the reloader.

use std::sync::Arc;

use super::build::Core;
use super::live_parts;
use crate::adapters::running::Running;
use crate::adapters::Adapter;
use crate::agent::mcp::McpManager;
use crate::cron::Scheduler;
use crate::reload::{Part, Reloader};
use crate::webhooks::Inbound;

/// Whether `key` is an allowlist key (`telegram.allowed_users`, `discord.allowed_roles`,
/// `<platform>.allow_all_users`, …) or `approvals.admins`: all read by the `Authorizer`.
fn allowlist_key(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    key.contains('.') && last.starts_with("allow") || key == "approvals.admins"
}

/// Whether `key` is read through the agents' per-turn snapshot (`crate::agent::roster`): the model
/// and its provider, the prompt sources and turn limits, context, memory and streaming
/// settings, every `[[agents]]` table and the bindings, `[budget]` (each agent's budget is
/// rebuilt over the shared ledger) and `[[people]]` as a turn reads them (memory, person
/// bindings, payers). A turn in flight keeps what it read.
fn agent_key(key: &str) -> bool {
    let section = key.split(['.', '[']).next().unwrap_or(key);
    matches!(
        section,
        "llm" | "agent" | "agents" | "bindings" | "context" | "streaming" | "people" | "budget"
    ) || key.starts_with("memory.") && !key.starts_with("memory.provider")
}

/// What `App::start` keeps of the live parts.
pub(super) struct Live {
    pub hooks: Arc<Inbound>,
    pub reload: Arc<Reloader>,
    /// The adapters' receiving sides (started last, by `App::start`).
    pub adapters: Arc<Running>,
}

impl Core {
    /// The webhook receivers, the adapters' running set and the reloader with its parts.
    pub(super) fn live(
        &self,
        cron: Option<Arc<Scheduler>>,
        mcp: Arc<McpManager>,
        adapters: &[Box<dyn Adapter>],
        agents: Arc<crate::agent::roster::LiveAgents>,
    ) -> anyhow::Result<Live> {
        let hooks = Arc::new(
            Inbound::new(
                &self.config,
                self.ingest.clone(),
                self.store.clone(),
                &format!("{}/hooks", self.replica_id),
                self.cron_poke.clone(),
            )
            .map_err(anyhow::Error::msg)?,
        );
        let running = Running::new(
            adapters,
            self.edge(),
            self.outbounds.clone(),
            &self.tracker,
            &self.cancel,
        );
        let auth = self.auth.clone();
        let mut parts = vec![Part {
            name: "allowlists",
            owns: Box::new(allowlist_key),
            apply: Box::new(move |c| {
                auth.replace(&c);
                Box::pin(async { Ok(()) })
            }),
        }];
        parts.push(Part {
            name: "agents",
            owns: Box::new(agent_key),
            apply: Box::new(move |c| {
                let r = agents.replace(c);
                Box::pin(async move { r })
            }),
        });
        // `/hooks/{name}` is always mounted, so the first hook can come by reload too.
        let inbound = hooks.clone();
        parts.push(Part {
            name: "hooks",
            owns: Box::new(|k| k == "hooks"),
            apply: Box::new(move |c| {
                let r = inbound.replace(&c);
                Box::pin(async move { r })
            }),
        });
        if let Some(cron) = cron {
            let poke = self.cron_poke.clone();
            parts.push(Part {
                name: "cron jobs",
                owns: Box::new(|k| k == "cron.jobs"),
                apply: Box::new(move |c| {
                    let (cron, poke) = (cron.clone(), poke.clone());
                    Box::pin(async move {
                        cron.sync_config(&c.cron.jobs)
                            .await
                            .map_err(|e| e.to_string())?;
                        poke.notify_one();
                        Ok(())
                    })
                }),
            });
        }
        parts.push(live_parts::mcp(mcp));
        parts.push(live_parts::people(
            self.approvals.clone(),
            self.budget_notices.clone(),
        ));
        parts.push(live_parts::adapters(running.clone()));
        let reload = Arc::new(Reloader::new(self.config.clone(), parts));
        Ok(Live {
            hooks,
            reload,
            adapters: running,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn allowlist_keys_are_the_authorizers() {
        for k in [
            "telegram.allowed_users",
            "discord.allowed_roles",
            "slack.allow_all_users",
            "approvals.admins",
        ] {
            assert!(super::allowlist_key(k), "{k}");
        }
        for k in ["telegram.token", "hooks", "allow", "llm.model"] {
            assert!(!super::allowlist_key(k), "{k}");
        }
    }
}
