//! Reaching one MCP server: start its process (stdio) or open its URL (streamable HTTP), run
//! `initialize` and list its tools, all within the server's `init_timeout_secs`.
//!
//! A stdio child is started by [`super::stdio`] (own process group, clean environment, stderr
//! kept for the reason of a failure); an HTTP server is reached through [`super::http`]'s
//! watched client. Every failure is one line a person can read: the most telling stderr line,
//! junk on stdout counted, no Rust type names, and a hint when a URL looks like the legacy
//! HTTP+SSE transport (not supported). Tools that require task augmentation are left out here.

use std::sync::Arc;
use std::time::Duration;

use rmcp::service::{ClientInitializeError, RoleClient, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use tokio::process::Child;
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use super::client::HeraldClient;
use super::stdio::{self, Group};
use super::task_only::TaskOnly;
use super::{ConnectError, Unreachable};
use crate::config::McpServer;

pub use super::stdio::Diagnostics;

/// The longest one JSON-RPC message (one stdout line, one HTTP body) may be: a bigger tool result
/// is dropped by the transport and the call ends as a time-out, not an out-of-memory.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// The longest server `instructions` put in the prompt.
pub const MAX_INSTRUCTIONS: usize = 2_000;

/// A live session with a server; dropping it ends the session and kills a stdio child's group.
pub struct Connection {
    pub service: RunningService<RoleClient, HeraldClient>,
    pub tools: Vec<rmcp::model::Tool>,
    pub child: Option<Child>,
    pub group: Option<Group>,
    pub diag: Arc<Diagnostics>,
    /// Rung when an HTTP answer matched no request (a lost session).
    pub suspect: Arc<Notify>,
    /// The server's `instructions`, screened and capped, or why they were withheld.
    pub instructions: Option<String>,
    /// Stops the stderr reader with the connection (a grandchild may hold the pipe open).
    pub _stderr: Option<DropGuard>,
}

impl Connection {
    /// Ends the session and, for stdio, the whole process group (SIGTERM, then SIGKILL).
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.service.close()).await;
        if let (Some(group), Some(child)) = (self.group.as_mut(), self.child.as_mut()) {
            group.end(child).await;
        }
    }
}

/// Connects, initializes and lists the tools, or says why not in one line.
pub async fn connect(server: &McpServer, tracker: &TaskTracker) -> Result<Connection, Unreachable> {
    let wait = Duration::from_secs(server.init_timeout_secs);
    let diag = Arc::new(Diagnostics::default());
    let stop = CancellationToken::new();
    let suspect = Arc::new(Notify::new());
    let handler = HeraldClient::new(&server.name);
    let (mut spawned, started) = match &server.url {
        Some(url) => {
            let ready = async {
                let service =
                    http(server, url.as_str(), handler, &suspect, &diag.task_only).await?;
                let tools = list_tools(&service, &diag, &server.name).await?;
                Ok((service, tools))
            };
            (None, tokio::time::timeout(wait, ready).await)
        }
        None => {
            let s = stdio::spawn(server, tracker, &diag, &stop)?;
            let transport = stdio::transport(s.stdout, s.stdin, diag.clone());
            let ready = async {
                let service = initialize(handler, transport).await?;
                let tools = list_tools(&service, &diag, &server.name).await?;
                Ok((service, tools))
            };
            (
                Some((s.child, s.group)),
                tokio::time::timeout(wait, ready).await,
            )
        }
    };
    let timed_out = started.is_err();
    let result = match started {
        Err(_) => Err(ConnectError::Timeout(wait.as_secs())),
        Ok(Err(e)) => Err(e),
        Ok(Ok(ready)) => Ok(ready),
    };
    match result {
        Ok((service, tools)) => {
            let instructions = instructions_of(&service, &server.name);
            let (child, group) = match spawned {
                Some((c, g)) => (Some(c), Some(g)),
                None => (None, None),
            };
            Ok(Connection {
                service,
                tools,
                child,
                group,
                diag,
                suspect,
                instructions,
                _stderr: Some(stop.drop_guard()),
            })
        }
        Err(cause) => {
            let mut cause = cause;
            if let Some((c, group)) = spawned.as_mut() {
                // A closed pipe usually means the process is exiting: give it a moment to. (After
                // a time-out the process is still there; it is ended below.)
                if !timed_out {
                    if let Ok(Ok(status)) =
                        tokio::time::timeout(Duration::from_millis(200), c.wait()).await
                    {
                        cause = ConnectError::Exited(status);
                    }
                }
                group.end(c).await;
            }
            // Give the stderr reader a moment to catch the child's last words.
            tokio::time::sleep(Duration::from_millis(20)).await;
            stop.cancel();
            let mut context = String::new();
            if let Some(url) = &server.url {
                context.push_str(&legacy_hint(url.as_str(), &cause.to_string()));
            }
            context.push_str(&diag.suffix());
            Err(Unreachable { cause, context })
        }
    }
}

/// The server's tools, less those that require task augmentation (one log line each).
pub async fn list_tools(
    service: &RunningService<RoleClient, HeraldClient>,
    diag: &Diagnostics,
    server: &str,
) -> Result<Vec<rmcp::model::Tool>, ConnectError> {
    let mut tools = service
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| ConnectError::ListTools(short(&e.to_string())))?;
    diag.task_only.leave_out(server, &mut tools);
    Ok(tools)
}

/// The `instructions` from `initialize`, screened (a hit withholds them, logged) and capped.
fn instructions_of(
    service: &RunningService<RoleClient, HeraldClient>,
    server: &str,
) -> Option<String> {
    let info = service.peer().peer_info()?;
    let text = info.instructions.as_deref()?.trim();
    if text.is_empty() {
        return None;
    }
    if let Some(finding) = crate::screen::screen(text) {
        tracing::warn!(server = %server, "mcp server instructions withheld: they carry {finding}");
        return None;
    }
    Some(crate::screen::cap_head_tail(
        text,
        MAX_INSTRUCTIONS,
        "the server's instructions",
    ))
}

/// What an operator should know when an HTTP server would not initialize and its URL looks
/// like the legacy HTTP+SSE transport.
fn legacy_hint(url: &str, reason: &str) -> String {
    let path = url.split('?').next().unwrap_or(url).trim_end_matches('/');
    if path.ends_with("/sse") || reason.contains("405") || reason.contains("text/event-stream") {
        " (Herald speaks stdio and streamable HTTP only; a legacy HTTP+SSE endpoint is not supported — point url at the server's streamable-HTTP endpoint, often /mcp)".to_string()
    } else {
        String::new()
    }
}

async fn initialize<T, E, A>(
    handler: HeraldClient,
    transport: T,
) -> Result<RunningService<RoleClient, HeraldClient>, ConnectError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    handler
        .serve(transport)
        .await
        .map_err(|e| ConnectError::Initialize(init_reason(&e)))
}

/// A person's reading of an initialize failure: no Rust type names, no `{:?}` dumps.
fn init_reason(e: &ClientInitializeError) -> String {
    match e {
        ClientInitializeError::ConnectionClosed(_) => {
            "the server closed the connection".to_string()
        }
        ClientInitializeError::TransportError { error, .. } => {
            let mut text = error.error.to_string();
            let mut source = error.error.source();
            while let Some(s) = source {
                text = format!("{text}: {s}");
                source = s.source();
            }
            short(&text)
        }
        ClientInitializeError::JsonRpcError(data) => {
            format!(
                "the server answered with an error: {}",
                short(&data.message)
            )
        }
        ClientInitializeError::NoCompatibleProtocolVersion { .. } => {
            "the server and Herald share no protocol version".to_string()
        }
        _ => "the server's answer was not an initialize result".to_string(),
    }
}

async fn http(
    server: &McpServer,
    url: &str,
    handler: HeraldClient,
    suspect: &Arc<Notify>,
    task_only: &Arc<TaskOnly>,
) -> Result<RunningService<RoleClient, HeraldClient>, ConnectError> {
    let client = reqwest::Client::builder()
        .build()
        .map_err(ConnectError::HttpClient)?;
    let mut headers = std::collections::HashMap::new();
    for (k, v) in &server.headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| ConnectError::Header(format!("{k:?} is not a header name")))?;
        let mut value = reqwest::header::HeaderValue::from_str(v.expose()).map_err(|_| {
            ConnectError::Header(format!("the value of {k:?} is not a header value"))
        })?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .custom_headers(headers)
        .max_json_response_size(MAX_MESSAGE_BYTES)
        .max_sse_event_size(MAX_MESSAGE_BYTES);
    if let Some(token) = &server.bearer_token {
        config = config.auth_header(token.expose().to_string());
    }
    let watched = super::http::Watched {
        inner: client,
        suspect: suspect.clone(),
        task_only: task_only.clone(),
    };
    initialize(
        handler,
        StreamableHttpClientTransport::with_client(watched, config),
    )
    .await
}

/// At most 200 characters of a message from a third party, on one line.
pub fn short(s: &str) -> String {
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect();
    one.trim().to_string()
}
