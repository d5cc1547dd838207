//! A reloaded `[[mcp.servers]]` list taken in place ([`McpManager::apply`]): a server whose
//! table is unchanged keeps its connection (its process, its session); a changed one is stopped
//! and started again with its new table; an added one starts; a removed or disabled one stops.
//! Its tools leave the list at once, so the next turn's snapshot has them no more; a turn in
//! flight keeps the list it took (a call it makes to a stopped server fails like one to a
//! server that went away). Must not: touch a server whose table did not change.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{run, McpManager, Slot};
use crate::config::McpServer;

/// One running server: the table it runs with (as compared), its tools, and its stop.
pub(super) struct Running {
    /// The table serialized with secrets as digests (`config::comparing_secrets`), never shown.
    table: serde_json::Value,
    pub(super) slot: Arc<Slot>,
    stop: CancellationToken,
}

/// What [`McpManager::apply`] did, by server name (the reload logs it).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub kept: Vec<String>,
    pub started: Vec<String>,
    pub restarted: Vec<String>,
    pub stopped: Vec<String>,
}

fn table_of(server: &McpServer) -> serde_json::Value {
    crate::config::comparing_secrets(|| serde_json::to_value(server).unwrap_or_default())
}

impl McpManager {
    /// Runs exactly the enabled servers of `servers`, in their order, touching only those whose
    /// table changed. Returns at once: a (re)started server connects in the background.
    pub fn apply(&self, servers: &[McpServer]) -> Applied {
        let mut done = Applied::default();
        let mut running = self.servers.lock().expect("mcp servers");
        let mut old: Vec<Running> = std::mem::take(&mut *running);
        for server in servers.iter().filter(|s| s.enabled) {
            let table = table_of(server);
            let before = old.iter().position(|r| r.slot.name == server.name);
            match before.map(|i| old.remove(i)) {
                Some(r) if r.table == table => {
                    done.kept.push(server.name.clone());
                    running.push(r);
                }
                was => {
                    if let Some(r) = was {
                        r.stop.cancel();
                        done.restarted.push(server.name.clone());
                    } else {
                        done.started.push(server.name.clone());
                    }
                    running.push(self.launch(server, table));
                }
            }
        }
        for gone in old {
            gone.stop.cancel();
            done.stopped.push(gone.slot.name.clone());
        }
        done
    }

    fn launch(&self, server: &McpServer, table: serde_json::Value) -> Running {
        let slot = Arc::new(Slot {
            name: server.name.clone(),
            ..Slot::default()
        });
        let stop = self.cancel.child_token();
        self.tracker.spawn(run(
            server.clone(),
            slot.clone(),
            self.tracker.clone(),
            stop.clone(),
        ));
        Running { table, slot, stop }
    }
}
