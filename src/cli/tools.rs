//! `herald tools list`: every tool the model could be offered, where it comes from, and what
//! the approval policy does with a call — the built-ins from the daemon's own function
//! (`toolset::builtins`) under the daemon's policy, and each MCP server reached once (within
//! its `init_timeout_secs`) to list what it offers now.

use std::sync::Arc;

use clap::Subcommand;
use serde::Serialize;
use tokio::sync::Notify;
use tokio_util::task::TaskTracker;

use crate::agent::mcp::{connect, tools_of};
use crate::agent::tools::{Check, Policy, Tool};
use crate::config::Config;
use crate::delivery::Outbounds;
use crate::hooks::Authorizer;
use crate::lanes::Ingest;
use crate::store::Store;
use crate::toolset::ToolDeps;

#[derive(Subcommand)]
pub enum ToolsCmd {
    /// Builtins and MCP tools with their origin and approval (MCP servers are contacted).
    List {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Serialize)]
struct Row {
    name: String,
    origin: String,
    /// `no`, `ask`, `hardline`, `denied`, `withheld: <reason>` for a tool that failed screening,
    /// or `unreachable: <reason>` for a server.
    approval: String,
    /// The rule behind `approval`: `destructive hint`, `config` (the server's
    /// `require_approval`), `tools.require_approval`, `approvals.hardline`, `approvals.deny`,
    /// `approvals.bypass`; empty when a call simply runs.
    why: String,
    /// The server marks the tool read-only (`readOnlyHint`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    read_only: bool,
}

pub async fn tools(config: &Config, cmd: ToolsCmd) -> anyhow::Result<()> {
    let ToolsCmd::List { json } = cmd;
    let policy = crate::agent::tools::approval_policy(config)?;
    let store = crate::store::connect("sqlite::memory:", 1).await?;
    store.migrate().await?;
    let mut rows: Vec<Row> = crate::toolset::builtins(config, &listing_deps(store.clone()))
        .iter()
        .map(|t| row(t, &policy))
        .collect();
    rows.sort_by(|a, b| a.name.cmp(&b.name));
    let tracker = TaskTracker::new();
    for server in &config.mcp.servers {
        let origin = format!("mcp:{}", server.name);
        if !server.enabled {
            rows.push(Row {
                name: "-".into(),
                origin,
                approval: "disabled".into(),
                why: String::new(),
                read_only: false,
            });
            continue;
        }
        match connect::connect(server, &tracker).await {
            Ok(conn) => {
                let (tools, withheld) = tools_of(server, &conn);
                for t in tools {
                    rows.push(row(&t, &policy));
                }
                for (name, why) in withheld {
                    rows.push(Row {
                        name,
                        origin: origin.clone(),
                        approval: format!("withheld: {why}"),
                        why: String::new(),
                        read_only: false,
                    });
                }
                conn.close().await;
            }
            Err(reason) => rows.push(Row {
                name: "-".into(),
                origin,
                approval: format!("unreachable: {reason}"),
                why: String::new(),
                read_only: false,
            }),
        }
    }
    store.close().await;
    if json {
        for r in &rows {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        let w = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
        let o = rows
            .iter()
            .map(|r| r.origin.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let a = rows
            .iter()
            .filter(|r| !r.why.is_empty())
            .map(|r| r.approval.len())
            .max()
            .unwrap_or(8)
            .max(8);
        println!("{:w$}  {:o$}  {:a$}  WHY", "NAME", "ORIGIN", "APPROVAL");
        for r in &rows {
            let line = format!(
                "{:w$}  {:o$}  {:a$}  {}",
                r.name, r.origin, r.approval, r.why
            );
            println!("{}", line.trim_end());
        }
    }
    Ok(())
}

/// The built-ins want the core's parts but listing them calls none: a throwaway in-memory
/// store (so `tools list` works before the first start and stays off the real one), a deny-all
/// authorizer, no outbounds.
fn listing_deps(store: Arc<dyn Store>) -> ToolDeps {
    let (finished, _) = tokio::sync::broadcast::channel(1);
    let auth = Authorizer::default();
    let (ingest, _wakes) = Ingest::new(store.clone(), auth.clone(), finished);
    ToolDeps {
        store,
        auth,
        ingest,
        outbounds: Outbounds::default(),
        outbox_wake: Arc::new(Notify::new()),
        cron_poke: Arc::new(Notify::new()),
        agents: None,
    }
}

fn row(t: &Arc<dyn Tool>, policy: &Policy) -> Row {
    let (check, why) = policy.explain(t.as_ref());
    Row {
        name: t.spec().name,
        origin: t.origin().to_string(),
        approval: approval_word(&check).into(),
        why,
        read_only: t.read_only(),
    }
}

fn approval_word(check: &Check) -> &'static str {
    match check {
        Check::Run => "no",
        Check::Ask { hardline: false } => "ask",
        Check::Ask { hardline: true } => "hardline",
        Check::Refuse(_) => "denied",
    }
}
