//! MCP servers as tool sources: one connection task per configured server, started in the
//! background (readiness never waits for a server), reconnecting with capped backoff, and
//! offering the server's tools only while it is connected.
//!
//! The manager is a [`ToolSource`]: [`ToolCatalog::snapshot`](crate::agent::tools::ToolCatalog)
//! reads it between turns, so a server that comes or goes changes the next turn's tool list,
//! never a running turn's. A server's tools are sorted by their model-visible name
//! ([`names::tool_name`]), which depends only on the server's and the tool's names.

pub mod connect;
pub mod names;
pub mod tool;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::tools::{Tool, ToolSource};
use crate::config::McpServer;

use connect::Connection;
use tool::McpTool;

/// The longest wait between two attempts to reach a server.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A connection that lived this long resets the backoff (one that dies at once does not).
const STABLE: Duration = Duration::from_secs(30);

/// The configured servers and the tools each offers right now.
pub struct McpManager {
    servers: Vec<Arc<Slot>>,
}

struct Slot {
    tools: Mutex<Vec<Arc<dyn Tool>>>,
}

impl ToolSource for McpManager {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.servers
            .iter()
            .flat_map(|s| s.tools.lock().expect("mcp slot").clone())
            .collect()
    }
}

impl McpManager {
    /// Starts one connection task per enabled server on `tracker`; returns at once.
    pub fn start(
        servers: &[McpServer],
        tracker: &TaskTracker,
        cancel: &CancellationToken,
    ) -> Arc<McpManager> {
        let mut slots = Vec::new();
        for server in servers.iter().filter(|s| s.enabled) {
            let slot = Arc::new(Slot {
                tools: Mutex::new(Vec::new()),
            });
            slots.push(slot.clone());
            tracker.spawn(run(
                server.clone(),
                slot,
                tracker.clone(),
                cancel.child_token(),
            ));
        }
        Arc::new(McpManager { servers: slots })
    }
}

/// Tools left out of a server's list: (model-visible name, why).
pub type Withheld = Vec<(String, String)>;

/// The tools of a fresh connection, in name order, and the tools withheld with the reason (a
/// screening hit in a description or schema).
pub fn tools_of(server: &McpServer, conn: &Connection) -> (Vec<Arc<dyn Tool>>, Withheld) {
    tools_with(server, conn, Arc::new(Notify::new()))
}

fn tools_with(
    server: &McpServer,
    conn: &Connection,
    broken: Arc<Notify>,
) -> (Vec<Arc<dyn Tool>>, Withheld) {
    let mut tools: Vec<McpTool> = Vec::new();
    let mut withheld = Vec::new();
    for t in &conn.tools {
        match McpTool::build(server, t, conn.service.peer().clone(), broken.clone()) {
            Ok(tool) => tools.push(tool),
            Err(why) => withheld.push((names::tool_name(&server.name, &t.name), why)),
        }
    }
    tools.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
    tools.dedup_by(|a, b| a.spec.name == b.spec.name);
    (tools.into_iter().map(tool::into_dyn).collect(), withheld)
}

fn backoff() -> impl Iterator<Item = Duration> {
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(MAX_BACKOFF)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

/// One server's life: connect, offer its tools until it goes away, wait, again.
async fn run(server: McpServer, slot: Arc<Slot>, tracker: TaskTracker, cancel: CancellationToken) {
    let name = server.name.clone();
    let mut delays = backoff();
    loop {
        let attempt = tokio::select! {
            c = connect::connect(&server, &tracker) => c,
            _ = cancel.cancelled() => return,
        };
        match attempt {
            Ok(mut conn) => {
                let broken = Arc::new(Notify::new());
                let (tools, withheld) = tools_with(&server, &conn, broken.clone());
                for (tool, why) in withheld {
                    tracing::warn!(server = %name, %tool, "mcp tool withheld: {why}");
                }
                tracing::info!(server = %name, tools = tools.len(), "mcp server connected");
                *slot.tools.lock().expect("mcp slot") = tools;
                let since = Instant::now();
                let service = conn.service;
                let ended = tokio::select! {
                    _ = service.waiting() => Some(""),
                    // A call found the connection gone (over HTTP the session can outlive the
                    // server): drop the session and start again.
                    _ = broken.notified() => Some(" (a call found the connection closed)"),
                    _ = cancel.cancelled() => None,
                };
                slot.tools.lock().expect("mcp slot").clear();
                let mut status = String::new();
                if let Some(child) = conn.child.as_mut() {
                    // A session that ended by itself usually means the process is exiting.
                    let grace = match ended {
                        Some("") => Duration::from_millis(200),
                        _ => Duration::ZERO,
                    };
                    if let Ok(Ok(s)) = tokio::time::timeout(grace, child.wait()).await {
                        status = format!(" (the process exited, {s})");
                    }
                    let _ = child.start_kill();
                    let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
                }
                let Some(how) = ended else {
                    return;
                };
                if since.elapsed() >= STABLE {
                    delays = backoff();
                }
                let wait = delays.next().unwrap_or(MAX_BACKOFF);
                tracing::warn!(
                    server = %name,
                    retry_in_ms = wait.as_millis() as u64,
                    "mcp server went away{how}{status}{}",
                    conn.diag.suffix()
                );
                if !crate::tasks::sleep_or_cancel(wait, &cancel).await {
                    return;
                }
            }
            Err(reason) => {
                let wait = delays.next().unwrap_or(MAX_BACKOFF);
                tracing::warn!(
                    server = %name,
                    retry_in_ms = wait.as_millis() as u64,
                    "mcp server unavailable: {reason}"
                );
                if !crate::tasks::sleep_or_cancel(wait, &cancel).await {
                    return;
                }
            }
        }
    }
}
