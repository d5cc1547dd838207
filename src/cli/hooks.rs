//! `herald hooks log|test`: a webhook's runs from the cron ledger (each delivery that ran is
//! a manual fire of the job `hook:<name>`), and what a saved payload would make of a hook
//! (its filter's verdict and the rendered message) without the model or the store.

use anyhow::{bail, Context};
use clap::Subcommand;

use crate::config::{Config, HookSpec};
use crate::store::Store;
use crate::webhooks::render;

#[derive(Subcommand, Debug, Clone)]
pub enum HooksCmd {
    /// Each hook's runs (or one hook's), newest first.
    Log {
        name: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// Render the message a saved JSON payload would run, and say whether the filter keeps
    /// it; nothing is stored and no model is asked.
    Test {
        name: String,
        file: std::path::PathBuf,
        /// A request header the filter may read (repeatable): `X-GitHub-Event=workflow_run`.
        #[arg(long = "header")]
        headers: Vec<String>,
    },
}

pub async fn hooks(config: &Config, cmd: HooksCmd) -> anyhow::Result<()> {
    let out = match cmd {
        HooksCmd::Test {
            name,
            file,
            headers,
        } => test(config, &name, &file, &headers)?,
        HooksCmd::Log { name, limit } => {
            let store = super::open_store(config, "hooks log", super::Access::Read).await?;
            let out = log(store.as_ref(), config, name.as_deref(), limit).await;
            store.close().await;
            out?
        }
    };
    print!("{out}");
    Ok(())
}

fn hook<'a>(config: &'a Config, name: &str) -> anyhow::Result<&'a HookSpec> {
    config
        .hooks
        .iter()
        .find(|h| h.name == name)
        .with_context(|| {
            let names: Vec<&str> = config.hooks.iter().map(|h| h.name.as_str()).collect();
            format!("no hook named {name:?} in [[hooks]] (configured: {names:?})")
        })
}

/// The ledger lines of `name` (or of every configured hook).
pub async fn log(
    store: &dyn Store,
    config: &Config,
    name: Option<&str>,
    limit: i64,
) -> anyhow::Result<String> {
    let hooks: Vec<&HookSpec> = match name {
        Some(n) => vec![hook(config, n)?],
        None => config.hooks.iter().collect(),
    };
    let mut fires = Vec::new();
    for h in hooks {
        fires.extend(store.cron_fires(Some(&h.job()), limit).await?);
    }
    fires.sort_by_key(|f| std::cmp::Reverse(f.id));
    fires.truncate(limit.max(0) as usize);
    let mut out = String::new();
    for f in fires {
        let inbox = f.inbox_id;
        out.push_str(&super::cron::fire_line(&super::cron::live(store, f).await?));
        out.push('\n');
        out.push_str(&super::cron::failed_deliveries(store, inbox).await?);
    }
    if out.is_empty() {
        out.push_str("no webhook runs\n");
    }
    Ok(out)
}

/// The filter's verdict and the message `file` would run as, for the hook `name`.
pub fn test(
    config: &Config,
    name: &str,
    file: &std::path::Path,
    headers: &[String],
) -> anyhow::Result<String> {
    let hook = hook(config, name)?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let payload: serde_json::Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not JSON", file.display()))?;
    let mut map = axum::http::HeaderMap::new();
    for h in headers {
        let Some((k, v)) = h.split_once('=') else {
            bail!("--header {h:?}: write NAME=VALUE");
        };
        let k = axum::http::HeaderName::try_from(k.trim()).context("--header name")?;
        map.insert(k, v.trim().parse().context("--header value")?);
    }
    let verdict = match render::passes(&hook.filter, &payload, &map) {
        Ok(()) => "the filter keeps it".to_string(),
        Err(why) => format!("the filter drops it: {why}"),
    };
    Ok(format!(
        "hook {name} ({:?} mode, delivers to {}): {verdict}\n--- message ---\n{}\n",
        hook.mode,
        hook.deliver.join(", "),
        render::message(hook, &payload)
    ))
}
