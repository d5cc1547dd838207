//! A stdio MCP server's process: started in a process group of its own with a clean
//! environment, its stdout read as newline-delimited JSON-RPC, its stderr kept for the reason
//! of a failure, and the whole group ended with the session.
//!
//! The group matters because servers are often started through a wrapper (`npx`, `uvx`, a
//! shell script): killing only the wrapper left the real server serving over the inherited
//! pipes. [`Group`] sends SIGTERM then SIGKILL to every process in the group, and SIGKILL when
//! dropped without that orderly end (a panic, a cancelled task).
//!
//! The stdout reader sees each message as JSON before rmcp does, which is how tools that
//! require task augmentation (`execution.taskSupport: "required"`, a field rmcp's `Tool` does
//! not carry) are recognised ([`super::task_only`]) and left out.

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec, LinesCodecError};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::connect::{short, MAX_MESSAGE_BYTES};
use super::task_only::TaskOnly;
use crate::config::McpServer;

/// What a server said besides JSON-RPC, and what its raw messages told us that rmcp drops.
#[derive(Default)]
pub struct Diagnostics {
    /// The most telling stderr line so far: (rank, line); see [`rank`].
    best_stderr: Mutex<Option<(u8, String)>>,
    last_stderr: Mutex<String>,
    junk_lines: AtomicU64,
    /// Tools listed with `execution.taskSupport: "required"` (over stdio or HTTP).
    pub task_only: Arc<TaskOnly>,
}

/// How much a stderr line says about a failure: npm's `404 Not Found` beats its closing
/// "A complete log of this run can be found in…".
fn rank(line: &str) -> u8 {
    let l = line.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| l.contains(w));
    let error = has(&["error", "err!", "fatal", "panic", "exception"]);
    let missing = has(&["not found", "404", "enoent", "no such file"]);
    match (error, missing) {
        // npm's `error 404 Not Found - GET …` over its `error code E404`.
        (true, true) if l.contains("not found") => 5,
        (true, true) => 4,
        (true, false) => 3,
        (false, true) => 2,
        _ if has(&["cannot", "failed", "denied"]) => 1,
        _ => 0,
    }
}

impl Diagnostics {
    fn stderr_line(&self, line: &str) {
        let line = short(line);
        if line.is_empty() {
            return;
        }
        let r = rank(&line);
        let mut best = self.best_stderr.lock().expect("diag lock");
        if r > 0 && best.as_ref().is_none_or(|(b, _)| r > *b) {
            *best = Some((r, line.clone()));
        }
        *self.last_stderr.lock().expect("diag lock") = line;
    }

    /// ` (stderr: …; N stdout lines were not JSON-RPC)`, or empty.
    pub fn suffix(&self) -> String {
        let mut parts = Vec::new();
        let junk = self.junk_lines.load(Ordering::Relaxed);
        if junk > 0 {
            parts.push(format!("{junk} line(s) on stdout were not JSON-RPC"));
        }
        let best = self.best_stderr.lock().expect("diag lock").clone();
        let err = match best {
            Some((_, line)) => line,
            None => self.last_stderr.lock().expect("diag lock").clone(),
        };
        if !err.is_empty() {
            parts.push(format!("stderr: {err}"));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join("; "))
        }
    }

    /// Reads one stdout line: the message, or `None` for junk (counted) and blank lines.
    fn message(&self, line: &str) -> Option<ServerJsonRpcMessage> {
        let line = line.trim();
        if line.is_empty() {
            return None;
        }
        let value: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) if line.starts_with('{') => v,
            _ => {
                self.junk_lines.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        };
        self.task_only.see(&value);
        match serde_json::from_value(value) {
            Ok(m) => Some(m),
            Err(_) => {
                self.junk_lines.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

/// The child's process group; ended with SIGKILL when dropped.
pub struct Group {
    pgid: Option<i32>,
}

impl Group {
    fn signal(&self, sig: i32) {
        if let Some(pgid) = self.pgid {
            // SAFETY: killpg only sends a signal; a group that is gone answers ESRCH.
            unsafe {
                libc::killpg(pgid, sig);
            }
        }
    }

    /// SIGTERM to the whole group, a moment for the leader to exit, then SIGKILL to whatever
    /// is left (a grandchild that ignored SIGTERM, or whose wrapper is already gone).
    pub async fn end(&mut self, child: &mut Child) {
        self.signal(libc::SIGTERM);
        let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
        self.signal(libc::SIGKILL);
        let _ = child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(1), child.wait()).await;
        self.pgid = None;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}

/// A started child: the process, its group, and the two halves of its JSON-RPC channel.
pub struct Spawned {
    pub child: Child,
    pub group: Group,
    pub stdout: ChildStdout,
    pub stdin: ChildStdin,
}

pub fn spawn(
    server: &McpServer,
    tracker: &TaskTracker,
    diag: &Arc<Diagnostics>,
    stop: &CancellationToken,
) -> Result<Spawned, super::ConnectError> {
    let program = server.command.as_deref().unwrap_or_default();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&server.args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for key in ["PATH", "HOME", "LANG"] {
        if let Some(v) = std::env::var_os(key) {
            cmd.env(key, v);
        }
    }
    for (k, v) in &server.env {
        cmd.env(k, v.expose());
    }
    let mut child = cmd.spawn().map_err(|source| super::ConnectError::Spawn {
        program: program.to_string(),
        source,
    })?;
    let group = Group {
        pgid: child.id().map(|p| p as i32),
    };
    let stdout = child
        .stdout
        .take()
        .ok_or(super::ConnectError::NoPipe("stdout"))?;
    let stdin = child
        .stdin
        .take()
        .ok_or(super::ConnectError::NoPipe("stdin"))?;
    if let Some(stderr) = child.stderr.take() {
        let diag = diag.clone();
        let name = server.name.clone();
        let stop = stop.clone();
        tracker.spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Some(Ok(Some(line))) = stop.run_until_cancelled(lines.next_line()).await {
                tracing::debug!(server = %name, "mcp server stderr: {}", short(&line));
                diag.stderr_line(&line);
            }
        });
    }
    Ok(Spawned {
        child,
        group,
        stdout,
        stdin,
    })
}

/// The rmcp transport over the child's pipes: one JSON message per line each way, a line
/// longer than [`MAX_MESSAGE_BYTES`] skipped (its call then times out).
pub fn transport(
    stdout: ChildStdout,
    stdin: ChildStdin,
    diag: Arc<Diagnostics>,
) -> (
    impl futures::Sink<ClientJsonRpcMessage, Error = LinesCodecError> + Send + Unpin + 'static,
    impl futures::Stream<Item = ServerJsonRpcMessage> + Send + Unpin + 'static,
) {
    let sink =
        FramedWrite::new(stdin, LinesCodec::new()).with(|m: ClientJsonRpcMessage| async move {
            serde_json::to_string(&m).map_err(|e| LinesCodecError::Io(std::io::Error::other(e)))
        });
    let lines = FramedRead::new(stdout, LinesCodec::new_with_max_length(MAX_MESSAGE_BYTES));
    let stream = futures::stream::unfold((lines, diag), |(mut lines, diag)| async move {
        loop {
            match lines.next().await? {
                Ok(line) => {
                    if let Some(m) = diag.message(&line) {
                        return Some((m, (lines, diag)));
                    }
                }
                Err(LinesCodecError::MaxLineLengthExceeded) => {
                    tracing::warn!(
                        "an MCP message was longer than {MAX_MESSAGE_BYTES} bytes and was dropped"
                    );
                }
                Err(LinesCodecError::Io(_)) => return None,
            }
        }
    });
    (Box::pin(sink), Box::pin(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_telling_stderr_line_is_kept() {
        let d = Diagnostics::default();
        for line in [
            "npm warn exec The following package was not found and will be installed",
            "npm error code E404",
            "npm error 404 Not Found - GET https://registry.example/@x%2fnope - Not found",
            "npm error A complete log of this run can be found in: /root/.npm/_logs/x.log",
        ] {
            d.stderr_line(line);
        }
        assert_eq!(
            d.suffix(),
            " (stderr: npm error 404 Not Found - GET https://registry.example/@x%2fnope - Not found)"
        );
        let d = Diagnostics::default();
        d.stderr_line("npm error code E404");
        d.stderr_line("npm error 404");
        d.stderr_line("npm error 404 Not Found - GET x");
        d.stderr_line("npm error A complete log of this run can be found in: x");
        assert_eq!(d.suffix(), " (stderr: npm error 404 Not Found - GET x)");
        let d = Diagnostics::default();
        d.stderr_line("starting");
        d.stderr_line("boom: the database is locked");
        assert_eq!(d.suffix(), " (stderr: boom: the database is locked)");
    }

    #[test]
    fn task_only_tools_are_seen_in_the_raw_list() {
        let d = Diagnostics::default();
        let m = d.message(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","inputSchema":{"type":"object"}},{"name":"b","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}]}}"#);
        assert!(m.is_some());
        assert!(d.task_only.contains("b") && !d.task_only.contains("a"));
        assert!(d.message("hello").is_none());
        assert!(d.suffix().contains("1 line(s)"));
    }
}
