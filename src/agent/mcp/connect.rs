//! Reaching one MCP server: start its process (stdio) or open its URL (streamable HTTP), run
//! `initialize` and list its tools, all within the server's `init_timeout_secs`.
//!
//! A stdio child gets a clean environment (PATH, HOME, LANG and its own `env` table, never
//! Herald's tokens), is killed when its connection is dropped, and its stderr is read line by
//! line into the debug log; the last line is kept for the reason of a failure. Stdout lines that
//! are not JSON-RPC are counted, so "prints garbage" is a reason a person can read instead of a
//! bare timeout.

use std::pin::Pin;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use tokio::io::{AsyncBufReadExt, AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStdout};
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;

use crate::config::McpServer;

/// The longest one JSON-RPC message (one stdout line, one HTTP body) may be: a bigger tool result
/// is dropped by the transport and the call ends as a time-out, not an out-of-memory.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A live session with a server; dropping it ends the session and kills a stdio child.
pub struct Connection {
    pub service: RunningService<RoleClient, ()>,
    pub tools: Vec<rmcp::model::Tool>,
    pub child: Option<Child>,
    pub diag: Arc<Diagnostics>,
    /// Stops the stderr reader with the connection (a grandchild may hold the pipe open).
    pub _stderr: Option<DropGuard>,
}

/// What a stdio child said besides JSON-RPC, for the reason of a failure.
#[derive(Default)]
pub struct Diagnostics {
    last_stderr: Mutex<String>,
    junk_lines: AtomicU64,
}

impl Diagnostics {
    /// ` (stderr: …; N stdout lines were not JSON-RPC)`, or empty.
    pub fn suffix(&self) -> String {
        let mut parts = Vec::new();
        let junk = self.junk_lines.load(Ordering::Relaxed);
        if junk > 0 {
            parts.push(format!("{junk} line(s) on stdout were not JSON-RPC"));
        }
        let err = self.last_stderr.lock().expect("diag lock").clone();
        if !err.is_empty() {
            parts.push(format!("stderr: {err}"));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join("; "))
        }
    }
}

/// Connects, initializes and lists the tools, or says why not in one line.
pub async fn connect(server: &McpServer, tracker: &TaskTracker) -> Result<Connection, String> {
    let wait = Duration::from_secs(server.init_timeout_secs);
    let diag = Arc::new(Diagnostics::default());
    let stop = CancellationToken::new();
    let (mut child, started) = match &server.url {
        Some(url) => (None, tokio::time::timeout(wait, http(server, url)).await),
        None => {
            let (child, stdout, stdin) = spawn(server, tracker, &diag, &stop)?;
            let transport = AsyncRwTransport::<RoleClient, _, _>::new(
                JunkCounter {
                    inner: stdout,
                    diag: diag.clone(),
                    line_start: true,
                },
                stdin,
            )
            .with_max_line_length(MAX_MESSAGE_BYTES);
            (
                Some(child),
                tokio::time::timeout(wait, initialize(transport)).await,
            )
        }
    };
    let timed_out = started.is_err();
    let result = match started {
        Err(_) => Err(format!(
            "no answer to initialize and tools/list within {} s",
            wait.as_secs()
        )),
        Ok(Err(e)) => Err(e),
        Ok(Ok((service, tools))) => Ok((service, tools)),
    };
    match result {
        Ok((service, tools)) => Ok(Connection {
            service,
            tools,
            child,
            diag,
            _stderr: Some(stop.drop_guard()),
        }),
        Err(reason) => {
            let mut reason = reason;
            if let Some(c) = child.as_mut() {
                // A closed pipe usually means the process is exiting: give it a moment to. (After
                // a time-out the process is still there; it is killed below.)
                if !timed_out {
                    if let Ok(Ok(status)) =
                        tokio::time::timeout(Duration::from_millis(200), c.wait()).await
                    {
                        reason = format!("the process exited ({status}) before it was ready");
                    }
                }
                let _ = c.start_kill();
                // Reap it; a child that ignores SIGKILL for a second is not worth waiting on.
                let _ = tokio::time::timeout(Duration::from_secs(1), c.wait()).await;
            }
            // Give the stderr reader a moment to catch the child's last words.
            tokio::time::sleep(Duration::from_millis(20)).await;
            stop.cancel();
            Err(format!("{reason}{}", diag.suffix()))
        }
    }
}

type Started = (RunningService<RoleClient, ()>, Vec<rmcp::model::Tool>);

async fn initialize<T, E, A>(transport: T) -> Result<Started, String>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let service = ()
        .serve(transport)
        .await
        .map_err(|e| format!("initialize failed: {}", short(&e.to_string())))?;
    let tools = service
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list failed: {}", short(&e.to_string())))?;
    Ok((service, tools))
}

async fn http(server: &McpServer, url: &str) -> Result<Started, String> {
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| format!("building the HTTP client: {e}"))?;
    let mut headers = std::collections::HashMap::new();
    for (k, v) in &server.headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("headers: {k:?} is not a header name"))?;
        let mut value = reqwest::header::HeaderValue::from_str(v.expose())
            .map_err(|_| format!("headers: the value of {k:?} is not a header value"))?;
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
    initialize(StreamableHttpClientTransport::with_client(client, config)).await
}

fn spawn(
    server: &McpServer,
    tracker: &TaskTracker,
    diag: &Arc<Diagnostics>,
    stop: &CancellationToken,
) -> Result<(Child, ChildStdout, tokio::process::ChildStdin), String> {
    let program = server.command.as_deref().unwrap_or_default();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&server.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for key in ["PATH", "HOME", "LANG"] {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    for (k, v) in &server.env {
        cmd.env(k, v.expose());
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not start {program:?}: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout pipe")?;
    let stdin = child.stdin.take().ok_or("no stdin pipe")?;
    if let Some(stderr) = child.stderr.take() {
        let diag = diag.clone();
        let name = server.name.clone();
        let stop = stop.clone();
        tracker.spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Some(Ok(Some(line))) = stop.run_until_cancelled(lines.next_line()).await {
                tracing::debug!(server = %name, "mcp server stderr: {}", short(&line));
                if !line.trim().is_empty() {
                    *diag.last_stderr.lock().expect("diag lock") = short(&line);
                }
            }
        });
    }
    Ok((child, stdout, stdin))
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

/// Passes stdout through untouched, counting lines that cannot be JSON-RPC (they do not start
/// with `{`); the transport itself ignores them silently.
struct JunkCounter<R> {
    inner: R,
    diag: Arc<Diagnostics>,
    line_start: bool,
}

impl<R: AsyncRead + Unpin> AsyncRead for JunkCounter<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if res.is_ready() {
            let this = &mut *self;
            for &b in &buf.filled()[before..] {
                if b == b'\n' {
                    this.line_start = true;
                } else if this.line_start && !b.is_ascii_whitespace() {
                    this.line_start = false;
                    if b != b'{' {
                        this.diag.junk_lines.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        res
    }
}
