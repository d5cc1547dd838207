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
        HttpShop::start_with(token, &[]).await
    }

    /// [`HttpShop::start`] with `extra` arguments (`--spans FILE`: the timed `peek`/`stamp`).
    pub async fn start_with(token: Option<&str>, extra: &[&str]) -> HttpShop {
        let mut cmd = tokio::process::Command::new("python3");
        cmd.arg(script()).args(["--http", "0"]).args(extra);
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

/// The server on the official Python SDK (`test-support/mcp/sdk_server.py`).
pub fn sdk_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/sdk_server.py")
}

/// A Python that can `import mcp`: `HERALD_MCP_PYTHON`, else the venv `.ci/run` makes
/// (`<repo>/.mcp-venv`), else `python3`. Panics with the install line when none can.
pub fn sdk_python() -> String {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.mcp-venv/bin/python3");
    let candidates = [
        std::env::var("HERALD_MCP_PYTHON").ok(),
        Some(venv.display().to_string()),
        Some("python3".to_string()),
    ];
    for p in candidates.into_iter().flatten() {
        let ok = std::process::Command::new(&p)
            .args(["-c", "import mcp.server.fastmcp"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return p;
        }
    }
    panic!(
        "no Python with the MCP SDK: run `python3 -m venv .mcp-venv && .mcp-venv/bin/pip install 'mcp>=1.9,<2'` (as .ci/run does) or set HERALD_MCP_PYTHON"
    );
}

/// The SDK server over stdio as `[[mcp.servers]]` entry `name`, with `extra` arguments.
pub fn sdk_stdio(name: &str, extra: &[&str]) -> McpServer {
    let mut args = vec![sdk_script().display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    McpServer {
        name: name.into(),
        command: Some(sdk_python()),
        args,
        // Importing the SDK takes seconds on a busy machine.
        init_timeout_secs: 60,
        ..McpServer::default()
    }
}

/// The SDK server over streamable HTTP on 127.0.0.1; killed when dropped.
pub struct HttpSdk {
    pub port: u16,
    pub url: String,
    child: Option<tokio::process::Child>,
}

impl HttpSdk {
    /// Starts it on `port` (0: any free port), answering requests with SSE streams.
    pub async fn start(port: u16) -> HttpSdk {
        HttpSdk::start_with(port, &[]).await
    }

    /// Starts it on `port` with `extra` arguments (`--json-response`: plain JSON answers).
    pub async fn start_with(port: u16, extra: &[&str]) -> HttpSdk {
        let mut child = tokio::process::Command::new(sdk_python())
            .arg(sdk_script())
            .args(["--http", &port.to_string()])
            .args(extra)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the SDK test server starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let port: u16 = lines
            .next_line()
            .await
            .expect("reads the port")
            .expect("the server prints its port")
            .trim()
            .parse()
            .expect("a port");
        // Serving once the port accepts connections.
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        HttpSdk {
            port,
            url: format!("http://127.0.0.1:{port}/mcp"),
            child: Some(child),
        }
    }

    /// Kills the server (its sessions die with it).
    pub async fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill().await;
        }
    }
}

/// The bytes `shop__chart` answers for `label`: a PNG signature and the label.
pub fn chart(label: &str) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    b.extend(format!("chart:{label}").as_bytes());
    b
}

/// The short id the model is told for a file of `bytes`.
pub fn short_id(bytes: &[u8]) -> String {
    herald::media::sha256_hex(bytes)[..12].to_string()
}

/// The shop server over stdio, writing a line to `<dir>/starts` each time it lists its tools.
pub fn shop_with_starts(dir: &Path) -> McpServer {
    let starts = dir.join("starts").display().to_string();
    stdio_server("shop", "normal", &["--starts", &starts])
}

/// Waits (up to 30 s) for [`shop_with_starts`]'s server to have listed its tools (the daemon
/// connects in the background).
pub async fn shop_ready(dir: &Path) {
    let starts = dir.join("starts");
    crate::harness::wait_until(
        "the shop server lists its tools",
        std::time::Duration::from_secs(30),
        || async { std::fs::read_to_string(&starts).is_ok_and(|s| !s.is_empty()) },
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
}

/// Scripts the fake model to draw a chart of `label`, attach it, and answer `text`.
pub fn chart_then_attach(llm: &crate::fake_llm::FakeLlm, label: &str, text: &str) {
    use crate::fake_llm::Step;
    llm.push(Step::ToolCall(
        "shop__chart".into(),
        format!(r#"{{"label":"{label}"}}"#),
    ));
    llm.push(Step::ToolCall(
        "attach_file".into(),
        format!(r#"{{"file":"{}"}}"#, short_id(&chart(label))),
    ));
    llm.push(Step::Reply(text.into()));
}
