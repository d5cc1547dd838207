//! The adapters' receiving sides as they run, so a reload can restart one: each adapter runs
//! under its own child cancel token and task tracker; [`Running::apply`] stops and starts again
//! exactly the adapters whose own table changed (allowlist keys aside: the `Authorizer` takes
//! those without a reconnect), with the new settings, and swaps its sending side in the shared
//! `Outbounds`. The others are not touched.
//!
//! Only an adapter without HTTP routes restarts live: a webhook route (Telegram's webhook mode,
//! Slack's Events API, WhatsApp) is mounted at start with its secret, so those tables, the web
//! chat's and the API's, a platform added by a reload and `<platform>.pacing` (read into the
//! shared pace at start) need a restart, and the reloader names them so. A platform whose table
//! a reload removes stops receiving; its queued replies still leave through its old sending
//! side until the restart. Must not: reconnect an adapter whose table did not change.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Adapter, Edge};
use crate::config::{spec, Config};
use crate::delivery::Outbounds;
use crate::domain::Platform;

/// How long a stopping adapter's tasks may take before its successor starts anyway.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// The receiving sides of this process's adapters.
pub struct Running {
    edge: Edge,
    outbounds: Outbounds,
    tracker: TaskTracker,
    root: CancellationToken,
    adapters: Mutex<BTreeMap<Platform, Handle>>,
    /// The tables of the adapters that can restart live (fixed at start).
    live: Vec<(Platform, &'static str)>,
}

struct Handle {
    /// The adapter's own table without its allowlist keys, secrets as digests; never shown.
    table: serde_json::Value,
    stop: CancellationToken,
    tasks: TaskTracker,
}

/// The config table platform `p` reads: `[telegram]`, `[discord]` or its own section.
fn table_name(p: Platform) -> Option<&'static str> {
    if p == super::telegram::TELEGRAM {
        return Some("telegram");
    }
    if p == super::discord::DISCORD {
        return Some("discord");
    }
    spec(p)?.section.as_ref().map(|s| s.name)
}

/// A key of a platform's table the adapter reads itself (not its allowlists, not its pace).
fn adapter_key(table: &str, key: &str) -> bool {
    let Some(rest) = key.strip_prefix(table) else {
        return false;
    };
    if rest.is_empty() {
        return true;
    }
    let Some(field) = rest.strip_prefix('.') else {
        return false;
    };
    let first = field.split('.').next().unwrap_or(field);
    !first.starts_with("allow") && first != "pacing"
}

/// `table` of `config`, with the keys [`adapter_key`] leaves to others removed.
fn own_table(config: &Config, table: &str) -> serde_json::Value {
    let all = crate::config::comparing_secrets(|| serde_json::to_value(config).unwrap_or_default());
    let mut t = all.get(table).cloned().unwrap_or_default();
    if let Some(map) = t.as_object_mut() {
        map.retain(|k, _| adapter_key(table, &format!("{table}.{k}")));
    }
    t
}

impl Running {
    /// The running set for `adapters` (nothing starts yet: [`Running::start`]); which of them
    /// can restart live is decided here, from their routes.
    pub fn new(
        adapters: &[Box<dyn Adapter>],
        edge: Edge,
        outbounds: Outbounds,
        tracker: &TaskTracker,
        root: &CancellationToken,
    ) -> Arc<Running> {
        let live = adapters
            .iter()
            .filter(|a| a.routes().is_none())
            .filter_map(|a| Some((a.platform(), table_name(a.platform())?)))
            .collect();
        Arc::new(Running {
            edge,
            outbounds,
            tracker: tracker.clone(),
            root: root.clone(),
            adapters: Mutex::new(BTreeMap::new()),
            live,
        })
    }

    /// Starts each adapter's receiving side, last at start: the core is ready for what they hear.
    pub fn start(&self, adapters: Vec<Box<dyn Adapter>>) {
        for adapter in adapters {
            let p = adapter.platform();
            let table = self.live.iter().find(|(q, _)| *q == p).map(|(_, t)| *t);
            let handle = self.launch(adapter, self.edge.clone(), table);
            self.adapters.lock().expect("adapters").insert(p, handle);
        }
    }

    /// Whether a reload applies `key` here (a key of a live adapter's own table).
    pub fn owns(&self, key: &str) -> bool {
        self.live.iter().any(|(_, t)| adapter_key(t, key))
    }

    /// The tables of the adapters that can restart live.
    pub fn owner(self: &Arc<Running>) -> impl Fn(&str) -> bool + Send + Sync + 'static {
        let this = self.clone();
        move |k| this.owns(k)
    }

    fn launch(&self, adapter: Box<dyn Adapter>, edge: Edge, table: Option<&str>) -> Handle {
        let stop = self.root.child_token();
        let tasks = TaskTracker::new();
        adapter.spawn(edge.clone(), &tasks, stop.clone());
        tasks.close();
        // The app's shutdown waits for the adapter's tasks through this one.
        let waited = tasks.clone();
        self.tracker.spawn(async move { waited.wait().await });
        Handle {
            table: table
                .map(|t| own_table(&edge.config, t))
                .unwrap_or_default(),
            stop,
            tasks,
        }
    }

    /// Restarts the live adapters whose own table differs in `config`; returns their platforms.
    /// A new adapter is built and checked (`preflight`: a refused token fails the reload with
    /// its key named, and the running adapter stays) before the old one stops.
    pub async fn apply(&self, config: Arc<Config>) -> Result<Vec<Platform>, String> {
        let mut restarted = Vec::new();
        for &(p, table) in &self.live {
            let fresh = own_table(&config, table);
            let same = {
                let adapters = self.adapters.lock().expect("adapters");
                adapters.get(&p).is_some_and(|h| h.table == fresh)
            };
            if same {
                continue;
            }
            let next = super::configured(&config)
                .map_err(|e| e.to_string())?
                .into_iter()
                .find(|a| a.platform() == p);
            if next.as_ref().is_some_and(|a| a.routes().is_some()) {
                return Err(format!(
                    "[{table}] now asks for an HTTP route: that needs a restart"
                ));
            }
            if let Some(check) = next.as_ref().and_then(|a| a.preflight()) {
                check.await?;
            }
            let old = self.adapters.lock().expect("adapters").remove(&p);
            if let Some(old) = old {
                old.stop.cancel();
                if tokio::time::timeout(STOP_WAIT, old.tasks.wait())
                    .await
                    .is_err()
                {
                    tracing::warn!(platform = %p, "the old adapter did not stop within 15 s; starting the new one anyway");
                }
            }
            let Some(adapter) = next else {
                tracing::warn!(platform = %p, "[{table}] removed: stopped receiving; its sending side stays until a restart");
                restarted.push(p);
                continue;
            };
            self.outbounds.replace(adapter.outbound());
            let edge = Edge {
                config: config.clone(),
                ..self.edge.clone()
            };
            let handle = self.launch(adapter, edge, Some(table));
            self.adapters.lock().expect("adapters").insert(p, handle);
            tracing::info!(platform = %p, "adapter restarted with its new settings");
            restarted.push(p);
        }
        Ok(restarted)
    }
}

#[cfg(test)]
mod tests {
    use super::adapter_key;

    #[test]
    fn an_adapter_owns_its_table_but_not_its_allowlists_or_pace() {
        for k in [
            "telegram.token",
            "telegram.api_url",
            "telegram",
            "slack.bot_token",
        ] {
            let table = k.split('.').next().unwrap();
            assert!(adapter_key(table, k), "{k}");
        }
        for (t, k) in [
            ("telegram", "telegram.allowed_users"),
            ("telegram", "telegram.allow_all_users"),
            ("telegram", "telegram.pacing"),
            ("telegram", "telegramx.token"),
            ("discord", "telegram.token"),
        ] {
            assert!(!adapter_key(t, k), "{k}");
        }
    }
}
