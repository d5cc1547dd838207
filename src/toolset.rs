//! The built-in tools a configuration offers: one function, called by the daemon (`app.rs`)
//! and by `herald tools list`, so the list an operator is shown is the list the model gets.
//!
//! It sits above `cron` and `lanes` because two built-ins live there (`cron` reaches the
//! scheduler, `send_message` other lanes' inboxes and the outbox); the rest come from
//! `agent`. Every condition that switches a tool on or off is written here and nowhere else.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::agent::tools::{AttachFile, SessionSearch, Tool};
use crate::config::Config;
use crate::delivery::Outbounds;
use crate::hooks::Authorizer;
use crate::lanes::{Ingest, SendMessage};
use crate::store::Store;

/// What the built-ins hold of the core. The daemon passes its own parts; `herald tools list`
/// passes parts no call will use (it builds the tools to read their names and approval, and
/// never calls one).
#[derive(Clone)]
pub struct ToolDeps {
    pub store: Arc<dyn Store>,
    /// `send_message` checks that the sender may reach the target conversation.
    pub auth: Authorizer,
    /// `send_message` records the message in the target conversation.
    pub ingest: Ingest,
    pub outbounds: Outbounds,
    pub outbox_wake: Arc<Notify>,
    /// The `cron` tool pokes the scheduler after a change.
    pub cron_poke: Arc<Notify>,
    /// `delegate` hands a goal to a named agent of the live roster (`None`: no roster here).
    pub agents: Option<Arc<crate::agent::roster::LiveAgents>>,
}

/// The built-in tools this configuration offers, in a fixed order.
pub fn builtins(config: &Config, deps: &ToolDeps) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(SessionSearch {
            store: deps.store.clone(),
        }),
        // Sends a file a tool produced (or the person sent) with the reply.
        Arc::new(AttachFile {
            store: deps.store.clone(),
        }),
    ];
    // One tool for every agent that keeps memory; it writes the turn's agent's own files, and
    // the roster offers it only to agents with memory on.
    let agent_memory = crate::agent::memory::tool::agent_files(config);
    if config.memory.enabled || !agent_memory.is_empty() {
        tools.push(Arc::new(crate::agent::memory::tool::MemoryTool {
            files: crate::agent::memory::MemoryFiles::from_config(config),
            people: config.people.clone(),
            agents: agent_memory,
            roster: deps.agents.clone(),
        }));
    }
    // Skills need a directory to live in; without one the model is not offered the tool.
    let skills = crate::agent::prompt::skills_dir(config);
    if skills.is_dir() {
        tools.push(Arc::new(crate::agent::skills::SkillView {
            dir: skills.clone(),
        }));
        if config.agent.skill_manage {
            tools.push(Arc::new(crate::agent::skill_manage::SkillManage {
                dir: skills,
            }));
        }
    }
    // The built-ins that act beyond the conversation, each switchable in `[tools]`.
    let approval = |name: &str| config.tools.require_approval.iter().any(|t| t == name);
    if config.tools.cron {
        tools.push(Arc::new(crate::cron::CronTool {
            store: deps.store.clone(),
            platforms: config.deliverable(),
            approval: approval("cron"),
            approval_create: approval("cron.create"),
            min_interval: Duration::from_secs(config.cron.chat_min_interval_secs),
            poke: deps.cron_poke.clone(),
            max_budget: config
                .budget
                .cron_run
                .and_then(crate::domain::Amount::from_units),
            currency: config.budget.currency.clone(),
        }));
    }
    if config.tools.send_message && !config.tools.send_message_routes.is_empty() {
        tools.push(Arc::new(SendMessage {
            store: deps.store.clone(),
            auth: deps.auth.clone(),
            ingest: deps.ingest.clone(),
            outbounds: deps.outbounds.clone(),
            outbox_wake: deps.outbox_wake.clone(),
            routes: config.tools.send_message_routes.clone(),
            known: config.deliverable(),
            approval: approval("send_message"),
        }));
    }
    // The web: `web_fetch` through the guarded client, `web_search` with a provider set.
    if config.tools.web_fetch {
        tools.push(Arc::new(crate::agent::tools::WebFetch::from_config(config)));
    }
    if config.tools.web_search {
        if let Some(search) = crate::agent::tools::WebSearch::from_config(config) {
            tools.push(Arc::new(search));
        }
    }
    if config.tools.delegate {
        tools.push(Arc::new(crate::agent::delegate::Delegate {
            limits: crate::agent::delegate::Limits {
                max_parallel: config.tools.delegate_max_parallel,
                max_iterations: config.tools.delegate_max_iterations,
            },
            store: deps.store.clone(),
            agents: deps.agents.clone(),
        }));
    }
    tools
}
