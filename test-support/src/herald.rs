//! The one way tests start the real `herald` binary: a builder for its arguments, environment,
//! data folder and output, and a guard that kills and reaps the process when it drops — also
//! when the test panics, so a failed SIGKILL test cannot leave a `herald` behind.
//!
//! The environment starts empty but for `PATH`, so a developer's `HERALD_*` or `OPENAI_*`
//! variables never reach a test's daemon; everything it needs is set here or by the test.
//! The common waits (port listening, `/healthz`, `/readyz`, a log line, exit) are methods of
//! the guard and fail with the daemon's log when it exits early or never gets there.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::harness::free_port;

/// The `herald` binary next to the running test, example or bench (`target/<profile>/herald`).
/// `CARGO_BIN_EXE_herald` is only set when herald's own integration tests compile, never for
/// this crate, so the path is found from the running executable: tests and benches live in
/// target/<profile>/deps/, examples in target/<profile>/examples/.
pub fn herald_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe
        .parent()
        .and_then(|p| p.parent())
        .expect("target/<profile>");
    profile_dir.join("herald")
}

/// Writes `<data>/herald.toml` for the real binary: listening on `listen`, keeping its state
/// in `data`, talking to the fake model at `llm_url`, followed by `extra` (more tables).
pub fn write_config(data: &Path, listen: &str, llm_url: &str, extra: &str) -> PathBuf {
    let file = data.join("herald.toml");
    let text = format!(
        "[server]\nlisten = {listen:?}\ndata_dir = {:?}\n\n\
         [llm]\nprovider = \"openai\"\nbase_url = {llm_url:?}\nmodel = \"fake-model\"\n\n{extra}",
        data.display().to_string(),
    );
    std::fs::write(&file, text).unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
    file
}

/// Where the process writes stdout and stderr.
#[derive(Clone, Debug)]
enum Sink {
    /// stdout dropped, stderr to the test's own stderr (a crash shows in the test output).
    Quiet,
    /// Both dropped.
    Silent,
    /// Both appended to one file, read back by [`Running::log`].
    File(PathBuf),
    /// Both piped, for [`Herald::output`].
    Piped,
}

/// How to run `herald`: built up, then [`Herald::spawn`]ed (a daemon) or [`Herald::output`]
/// (a one-shot command).
#[derive(Clone, Debug)]
pub struct Herald {
    bin: PathBuf,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    port: Option<u16>,
    sink: Sink,
}

impl Default for Herald {
    fn default() -> Self {
        Herald::new()
    }
}

impl Herald {
    /// `herald` with no arguments and an environment of only `PATH`.
    pub fn new() -> Herald {
        Herald {
            bin: herald_bin(),
            args: Vec::new(),
            env: vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())],
            port: None,
            sink: Sink::Quiet,
        }
    }

    /// `herald serve --listen 127.0.0.1:<port> --data-dir <data>`.
    pub fn serve(port: u16, data: &Path) -> Herald {
        Herald::new()
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--data-dir")
            .arg(data)
            .port(port)
    }

    /// [`Herald::serve`] on a port that was free a moment ago.
    pub fn serve_anywhere(data: &Path) -> Herald {
        Herald::serve(free_port(), data)
    }

    /// `herald --config <file> serve`; `port` is the one the file listens on, for the waits.
    pub fn serve_config(config: &Path, port: u16) -> Herald {
        Herald::new()
            .arg("--config")
            .arg(config)
            .arg("serve")
            .port(port)
    }

    /// Another binary in herald's place (the load bench may name one).
    pub fn bin(mut self, bin: &Path) -> Herald {
        self.bin = bin.to_path_buf();
        self
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Herald {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Herald
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets one variable (a later call for the same key wins).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Herald {
        let key = key.into();
        self.env.retain(|(k, _)| *k != key);
        self.env.push((key, value.into()));
        self
    }

    pub fn envs<I, K, V>(self, vars: I) -> Herald
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        vars.into_iter().fold(self, |h, (k, v)| h.env(k, v))
    }

    /// The port the daemon listens on, when the arguments or config file do not say it in a
    /// form [`Herald::serve`] set.
    pub fn port(mut self, port: u16) -> Herald {
        self.port = Some(port);
        self
    }

    /// The fake model at `base_url` (`HERALD_LLM__BASE_URL`, model `fake-model`).
    pub fn fake_model(self, base_url: &str) -> Herald {
        self.env("HERALD_LLM__BASE_URL", base_url)
            .env("HERALD_LLM__MODEL", "fake-model")
    }

    /// Short leases, so a killed holder's lanes come back in about two seconds.
    pub fn fast_leases(self) -> Herald {
        self.env("HERALD_LANES__LEASE_TTL_SECS", "2")
            .env("HERALD_LANES__HEARTBEAT_SECS", "1")
            .env("HERALD_LANES__RESCAN_SECS", "1")
    }

    /// stdout and stderr appended to `path` (created if missing).
    pub fn log_to(mut self, path: &Path) -> Herald {
        self.sink = Sink::File(path.to_path_buf());
        self
    }

    /// stdout and stderr dropped.
    pub fn silent(mut self) -> Herald {
        self.sink = Sink::Silent;
        self
    }

    /// The command this builder describes, for a caller that needs `std::process` itself.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args).env_clear();
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        match &self.sink {
            Sink::Quiet => {
                cmd.stdout(Stdio::null()).stderr(Stdio::inherit());
            }
            Sink::Silent => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
            Sink::Piped => {
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            }
            Sink::File(path) => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
                cmd.stdout(Stdio::from(log.try_clone().expect("log handle")))
                    .stderr(Stdio::from(log));
            }
        }
        cmd
    }

    /// Runs a one-shot command to its end and returns what it printed.
    pub fn output(mut self) -> Output {
        self.sink = Sink::Piped;
        self.command()
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.bin.display()))
    }

    /// Starts the process; it is killed and reaped when the guard drops.
    pub fn spawn(self) -> Running {
        let child = self
            .command()
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.bin.display()));
        let log = match self.sink {
            Sink::File(path) => Some(path),
            _ => None,
        };
        Running {
            child,
            port: self.port,
            log,
        }
    }
}

/// A running `herald`. Dropping it sends SIGKILL and reaps the process.
pub struct Running {
    child: Child,
    port: Option<u16>,
    log: Option<PathBuf>,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn port(&self) -> u16 {
        self.port.expect("a daemon started with a known port")
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port())
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// What the process wrote so far (empty unless started with [`Herald::log_to`]).
    pub fn log(&self) -> String {
        self.log
            .as_ref()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .unwrap_or_default()
    }

    /// SIGKILL: no drain, no lease release, no flush. The process is reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM: the graceful shutdown path. Does not wait; see [`Running::wait_exit`].
    pub fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
    }

    /// The exit status, if the process has ended.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits (polling) up to `timeout` for the process to end; panics with the log if it
    /// does not.
    pub async fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "herald did not exit within {timeout:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls `ready` until it holds; panics with the log if the process ends first or the
    /// time runs out.
    async fn wait_for<F, Fut>(&mut self, what: &str, timeout: Duration, mut ready: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + timeout;
        loop {
            if ready().await {
                return;
            }
            if let Some(status) = self.try_wait() {
                panic!(
                    "herald exited ({status}) before {what}; log:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "herald never got to {what} within {timeout:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Until the port accepts a TCP connection.
    pub async fn wait_listening(&mut self, timeout: Duration) {
        let addr = self.addr();
        self.wait_for("listening", timeout, || {
            let addr = addr.clone();
            async move { tokio::net::TcpStream::connect(addr).await.is_ok() }
        })
        .await;
    }

    /// Until `GET /healthz` answers 2xx.
    pub async fn wait_healthy(&mut self, timeout: Duration) {
        self.wait_ok("/healthz", timeout).await;
    }

    /// Until `GET /readyz` answers 2xx (store open, adapters started).
    pub async fn wait_ready(&mut self, timeout: Duration) {
        self.wait_ok("/readyz", timeout).await;
    }

    async fn wait_ok(&mut self, path: &str, timeout: Duration) {
        let url = format!("{}{path}", self.base_url());
        let http = reqwest::Client::new();
        self.wait_for(&format!("a 2xx from {path}"), timeout, || {
            let req = http.get(&url);
            async move { req.send().await.is_ok_and(|r| r.status().is_success()) }
        })
        .await;
    }

    /// Until the log holds `needle`; returns the log as it was then.
    pub async fn wait_log(&mut self, needle: &str, timeout: Duration) -> String {
        let path = self.log.clone().expect("a daemon started with log_to");
        let read = || std::fs::read_to_string(&path).unwrap_or_default();
        self.wait_for(&format!("logging {needle:?}"), timeout, || {
            let found = read().contains(needle);
            async move { found }
        })
        .await;
        read()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}
