//! The throwaway Herald a case runs in: the operator's configuration with everything that
//! reaches outside taken away — a fresh data dir and SQLite store (never the live one), no
//! platform adapter (so no outbox row can be sent and no question shown: a call that needs a
//! person's approval is asked for and denied), no cron, no nightly closer, no MCP server, no
//! memory provider — and tools refused unless `--allow-tools` names them.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use crate::agent::tools::{approval_policy, Check};
use crate::config::Config;
use crate::delivery::Outbounds;
use crate::hooks::Authorizer;
use crate::lanes::Ingest;
use crate::toolset::ToolDeps;

/// The configuration every case of a run starts from; `data_dir` is set per case.
#[derive(Clone)]
pub struct Sandbox {
    pub config: Config,
    /// An empty SQLite store with every migration applied, copied into each case's data dir:
    /// migrating once per run instead of once per case.
    template: Arc<tempfile::TempDir>,
}

impl Sandbox {
    /// `config` made safe to run cases on. Tools the operator did not allow are denied
    /// (`approvals.deny`) unless a call of them asks a person first, which no one can answer
    /// here: those stay, so `approval_asked` can see the question, and are denied.
    pub async fn new(config: &Config, allow_tools: &[String]) -> anyhow::Result<Sandbox> {
        let mut c = config.clone();
        crate::config::link_api_keys(&mut c);
        if c.agent.skills_dir.is_none() {
            // The operator's skills are part of what is evaluated; the data dir is not.
            c.agent.skills_dir = Some(c.server.data_dir.join("skills"));
        }
        c.server.listen = "127.0.0.1:0".parse().expect("a socket address");
        c.server.replica_id = Some("herald-eval".into());
        c.store.url = None;
        c.web.enabled = false;
        c.api.enabled = false;
        c.telegram.token = None;
        c.discord.token = None;
        // The platforms' own tables (`[slack]`, `[email]`, …): no adapter starts without one.
        c.sections.clear();
        c.cron.enabled = false;
        c.cron.jobs.clear();
        c.handoff.nightly = String::new();
        c.handoff.export_dir = None;
        c.mcp.servers.clear();
        c.memory.provider.url = None;
        c.telemetry.otlp_endpoint = None;
        c.approvals.bypass = false;
        c.approvals
            .deny
            .extend(denied_tools(&c, allow_tools).await?);
        let template = tempfile::Builder::new()
            .prefix("herald-eval-template-")
            .tempdir()?;
        let store = crate::store::connect(&sqlite_url(template.path()), 1).await?;
        let migrated = store.migrate().await;
        store.close().await;
        migrated?;
        Ok(Sandbox {
            config: c,
            template: Arc::new(template),
        })
    }

    /// The configuration of one case on `dir`, where the migrated store is copied first.
    pub fn on(&self, dir: &Path) -> std::io::Result<Config> {
        std::fs::copy(self.template.path().join(DB), dir.join(DB))?;
        let mut c = self.config.clone();
        c.server.data_dir = dir.to_path_buf();
        Ok(c)
    }
}

/// The store file under a data dir when no `store.url` is set (`Config::store_url`).
const DB: &str = "herald.db";

fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join(DB).display())
}

/// The built-in tools a call of which would run without asking and that `allow` does not
/// name: they are refused in evals.
async fn denied_tools(config: &Config, allow: &[String]) -> anyhow::Result<Vec<String>> {
    let allow: HashSet<&str> = allow.iter().map(String::as_str).collect();
    let policy = approval_policy(config)?;
    let store = crate::store::connect("sqlite::memory:", 1).await?;
    store.migrate().await?;
    let (finished, _) = tokio::sync::broadcast::channel(1);
    let auth = Authorizer::default();
    let (ingest, _wakes) = Ingest::new(store.clone(), auth.clone(), finished);
    let deps = ToolDeps {
        store: store.clone(),
        auth,
        ingest,
        outbounds: Outbounds::default(),
        outbox_wake: Default::default(),
        cron_poke: Default::default(),
        agents: None,
    };
    let mut out = Vec::new();
    for tool in crate::toolset::builtins(config, &deps) {
        let name = tool.spec().name;
        let (check, _) = policy.explain(tool.as_ref());
        if check == Check::Run && !allow.contains(name.as_str()) {
            out.push(name);
        }
    }
    store.close().await;
    Ok(out)
}
