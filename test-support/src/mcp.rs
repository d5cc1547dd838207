//! The test MCP server (`test-support/mcp/shop_server.py`, a real server speaking JSON-RPC over
//! stdio or streamable HTTP, Python standard library only) and the `[[mcp.servers]]` entries
//! that start it, for the MCP tests and the MCP benchmark.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use herald::config::McpServer;
use tokio::io::AsyncBufReadExt;

/// The server script.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/shop_server.py")
}

/// A stdio server named `name` run in `mode` (`normal`, `garbage`, `mute`, `exit`) with `extra`
/// arguments (`--state FILE`, `--gate FILE`, `--starts FILE`).
pub fn stdio_server(name: &str, mode: &str, extra: &[&str]) -> McpServer {
    let mut args = vec![
        script().display().to_string(),
        "--mode".to_string(),
        mode.to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    McpServer {
        name: name.into(),
        command: Some("python3".into()),
        args,
        ..McpServer::default()
    }
}

/// The same server over streamable HTTP on 127.0.0.1; killed when dropped.
pub struct HttpShop {
    pub url: String,
    _child: tokio::process::Child,
}

impl HttpShop {
    /// Starts it, requiring `Authorization: Bearer <token>` when `token` is set.
    pub async fn start(token: Option<&str>) -> HttpShop {
        let mut cmd = tokio::process::Command::new("python3");
        cmd.arg(script()).args(["--http", "0"]);
        if let Some(t) = token {
            cmd.args(["--token", t]);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 starts the HTTP test server");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let port = lines
            .next_line()
            .await
            .expect("reads the port")
            .expect("the server prints its port");
        HttpShop {
            url: format!("http://127.0.0.1:{}/mcp", port.trim()),
            _child: child,
        }
    }
}
