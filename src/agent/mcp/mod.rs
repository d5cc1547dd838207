//! MCP servers as tool sources: one connection task per configured server, started in the
//! background (readiness never waits for a server), reconnecting with capped backoff, and
//! offering the server's tools only while it is connected.
//!
//! The manager is a [`ToolSource`]: [`ToolCatalog::snapshot`](crate::agent::tools::ToolCatalog)
//! reads it between turns, so a server that comes or goes — or announces a new tool list with
//! `notifications/tools/list_changed` — changes the next turn's tool list, never a running
//! turn's. A server's tools are sorted by their model-visible name ([`names::tool_name`]);
//! should two servers still produce one name, the later server's tool gets a hash suffix
//! ([`names::dedupe`]) and a warning, so no server silently shadows another.
//!
//! A reload hands the manager the new list ([`McpManager::apply`], `apply.rs`): only servers
//! whose table changed are restarted.
//!
//! A session is dropped and started again when its transport closes, when a call finds it
//! closed, when an HTTP answer matches no request (a server restarted under a stale session),
//! when a timed-out call is followed by an unanswered ping, or when a stdio server's own process
//! exits (its process group is then ended, so a wrapper's grandchild does not live on).

mod apply;
pub mod client;
pub mod connect;
mod error;
mod http;
pub mod names;
pub mod resource;
pub mod stdio;
pub mod task_only;
pub mod tool;

pub use apply::Applied;
pub use error::{ConnectError, ToolWithheld, Unreachable};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backon::BackoffBuilder;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::tools::{Tool, ToolSource};
use crate::config::McpServer;

use connect::Connection;
use tool::{McpTool, Session};

/// The longest wait between two attempts to reach a server.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A connection that lived this long resets the backoff (one that dies at once does not).
const STABLE: Duration = Duration::from_secs(30);
/// How long a suspect session has to answer a ping.
const PROBE: Duration = Duration::from_secs(5);

/// The configured servers and the tools each offers right now.
pub struct McpManager {
    /// The running servers in configuration order; [`McpManager::apply`] changes the list.
    servers: Mutex<Vec<apply::Running>>,
    warned: names::Warned,
    tracker: TaskTracker,
    cancel: CancellationToken,
}

#[derive(Default)]
struct Slot {
    name: String,
    tools: Mutex<Vec<Arc<dyn Tool>>>,
    instructions: Mutex<Option<String>>,
}

impl ToolSource for McpManager {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let lists: Vec<Vec<Arc<dyn Tool>>> = self
            .slots()
            .iter()
            .map(|s| s.tools.lock().expect("mcp slot").clone())
            .collect();
        names::dedupe(lists, &self.warned)
    }

    fn guidance(&self) -> Vec<(String, String)> {
        self.slots()
            .iter()
            .filter_map(|s| {
                let text = s.instructions.lock().expect("mcp slot").clone()?;
                Some((
                    format!("tool guidance (mcp:{})", s.name),
                    format!(
                        "Instructions from the MCP server \"{}\" (its tools are named {}__*):\n{text}",
                        s.name, s.name
                    ),
                ))
            })
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
        let manager = McpManager {
            servers: Mutex::new(Vec::new()),
            warned: names::Warned::default(),
            tracker: tracker.clone(),
            cancel: cancel.clone(),
        };
        manager.apply(servers);
        Arc::new(manager)
    }

    fn slots(&self) -> Vec<Arc<Slot>> {
        let servers = self.servers.lock().expect("mcp servers");
        servers.iter().map(|r| r.slot.clone()).collect()
    }
}

/// Tools left out of a server's list: (model-visible name, why).
pub type Withheld = Vec<(String, String)>;

/// The tools of a fresh connection, in name order, and the tools withheld with the reason (a
/// screening hit in a description or schema).
pub fn tools_of(server: &McpServer, conn: &Connection) -> (Vec<Arc<dyn Tool>>, Withheld) {
    tools_with(server, conn, &conn.tools, session_of(conn))
}

/// The server's tool `remote` as an [`McpTool`] on this connection, for callers that want the
/// whole result ([`McpTool::call_full`]: the text and the images).
pub fn mcp_tool(server: &McpServer, conn: &Connection, remote: &str) -> Option<McpTool> {
    let t = conn.tools.iter().find(|t| t.name == remote)?;
    McpTool::build(server, t, session_of(conn)).ok()
}

fn session_of(conn: &Connection) -> Session {
    Session {
        peer: conn.service.peer().clone(),
        client: conn.service.service().clone(),
        broken: Arc::new(Notify::new()),
        probe: Arc::new(Notify::new()),
    }
}

fn tools_with(
    server: &McpServer,
    conn: &Connection,
    listed: &[rmcp::model::Tool],
    session: Session,
) -> (Vec<Arc<dyn Tool>>, Withheld) {
    let mut tools: Vec<McpTool> = Vec::new();
    let mut withheld = Vec::new();
    for t in listed {
        match McpTool::build(server, t, session.clone()) {
            Ok(tool) => tools.push(tool),
            Err(why) => withheld.push((names::tool_name(&server.name, &t.name), why.to_string())),
        }
    }
    tools.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
    tools.dedup_by(|a, b| a.spec.name == b.spec.name);
    let mut out: Vec<Arc<dyn Tool>> = tools.into_iter().map(tool::into_dyn).collect();
    let resources = conn
        .service
        .peer()
        .peer_info()
        .is_some_and(|i| i.capabilities.resources.is_some());
    if resources && !listed.iter().any(|t| t.name == resource::NAME) {
        out.push(Arc::new(resource::ReadResource {
            server: server.name.clone(),
            name: names::tool_name(&server.name, resource::NAME),
            timeout: Duration::from_secs(server.timeout_secs),
            session,
        }));
        out.sort_by_key(|t| t.spec().name);
    }
    (out, withheld)
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
                let since = Instant::now();
                let ended = serve(&server, &slot, &mut conn, &cancel).await;
                slot.tools.lock().expect("mcp slot").clear();
                let mut status = String::new();
                if let Some(child) = conn.child.as_mut() {
                    // A session that ended by itself usually means the process is exiting.
                    if ended == Some("") {
                        if let Ok(Ok(s)) =
                            tokio::time::timeout(Duration::from_millis(200), child.wait()).await
                        {
                            status = format!(" (the process exited, {s})");
                        }
                    }
                }
                let diag = conn.diag.suffix();
                conn.close().await;
                let Some(how) = ended else {
                    return;
                };
                // A lost HTTP session wants a new one now, not after a backoff.
                let wait = if how == SUSPECT {
                    delays = backoff();
                    Duration::from_millis(100)
                } else {
                    if since.elapsed() >= STABLE {
                        delays = backoff();
                    }
                    delays.next().unwrap_or(MAX_BACKOFF)
                };
                tracing::warn!(
                    server = %name,
                    retry_in_ms = wait.as_millis() as u64,
                    "mcp server went away{how}{status}{diag}"
                );
                if crate::tasks::sleep_or_cancel(wait, &cancel).await.is_err() {
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
                if crate::tasks::sleep_or_cancel(wait, &cancel).await.is_err() {
                    return;
                }
            }
        }
    }
}

const SUSPECT: &str = " (an HTTP answer matched no request: the session was lost)";

/// Offers a connected server's tools until the session ends; says how it ended (`None` when
/// Herald is stopping).
async fn serve(
    server: &McpServer,
    slot: &Slot,
    conn: &mut Connection,
    cancel: &CancellationToken,
) -> Option<&'static str> {
    let name = &server.name;
    let session = session_of(conn);
    let publish = |listed: &[rmcp::model::Tool], conn: &Connection| {
        let (tools, withheld) = tools_with(server, conn, listed, session.clone());
        for (tool, why) in withheld {
            tracing::warn!(server = %name, %tool, "mcp tool withheld: {why}");
        }
        let n = tools.len();
        *slot.tools.lock().expect("mcp slot") = tools;
        n
    };
    let listed = conn.tools.clone();
    let n = publish(&listed, conn);
    *slot.instructions.lock().expect("mcp slot") = conn.instructions.clone();
    tracing::info!(server = %name, tools = n, "mcp server connected");
    let changed = conn.service.service().lists_changed.clone();
    let suspect = conn.suspect.clone();
    // The session's own loop ends when its transport closes (rmcp's `waiting` would consume
    // the service, which the re-listing below still needs).
    let peer = conn.service.peer().clone();
    let closed = async move {
        while !peer.is_transport_closed() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::pin!(closed);
    loop {
        let exited = async {
            match conn.child.as_mut() {
                Some(c) => {
                    let _ = c.wait().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut closed => return Some(""),
            // A call found the connection gone (over HTTP the session can outlive the server).
            _ = session.broken.notified() => return Some(" (a call found the connection closed)"),
            _ = suspect.notified() => return Some(SUSPECT),
            // The wrapper exited while something in its group may still hold the pipes.
            _ = exited => return Some(" (its process exited)"),
            _ = session.probe.notified() => {
                let ping = conn.service.peer().send_request(rmcp::model::ClientRequest::PingRequest(Default::default()));
                if !matches!(tokio::time::timeout(PROBE, ping).await, Ok(Ok(_))) {
                    return Some(" (a call timed out and the server did not answer a ping)");
                }
            }
            _ = changed.notified() => {
                match connect::list_tools(&conn.service, &conn.diag, name).await {
                    Ok(listed) => {
                        let n = publish(&listed, conn);
                        tracing::info!(server = %name, tools = n, "mcp tool list updated");
                    }
                    Err(e) => tracing::warn!(server = %name, "mcp tool list update failed: {e}"),
                }
            }
            _ = cancel.cancelled() => return None,
        }
    }
}
