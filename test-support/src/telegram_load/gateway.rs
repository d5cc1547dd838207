//! What a load run measures: Herald (one `herald serve`, or several replicas on one Postgres
//! schema) or the echo floor (`examples/echo_floor.rs`, the storage-free gateway of issue #34),
//! each a child process, so both are read the same way: CPU and memory from /proc of its pid,
//! heap allocations from its counting allocator (Herald's `/metrics` gauge in a build with the
//! `count-alloc` feature; the floor's answer on its stdin/stdout).
//!
//! Must not: measure the driver's own process.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use crate::promise::daemon::{herald_bin, Daemon};

/// The process(es) under load.
pub enum Gateway {
    /// Herald replicas, the poller first to start; one in the ordinary runs.
    Herald(Vec<Daemon>),
    Floor(Floor),
}

impl Gateway {
    pub fn name(&self) -> &'static str {
        match self {
            Gateway::Herald(_) => "herald",
            Gateway::Floor(_) => "floor",
        }
    }

    pub fn pids(&self) -> Vec<u32> {
        match self {
            Gateway::Herald(d) => d.iter().map(Daemon::pid).collect(),
            Gateway::Floor(f) => vec![f.child.id()],
        }
    }

    /// Herald's replica ids (as in the `holder` of its leases and turns), in start order.
    pub fn replica_ids(&self) -> Vec<String> {
        match self {
            Gateway::Herald(d) => d
                .iter()
                .map(|d| Daemon::replica_id(&d.spec, d.generation))
                .collect(),
            Gateway::Floor(_) => Vec::new(),
        }
    }

    pub fn bin(&self) -> PathBuf {
        match self {
            Gateway::Herald(d) => d[0].spec.bin.clone(),
            Gateway::Floor(f) => f.bin.clone(),
        }
    }

    /// The last lines each process logged.
    pub fn log_tail(&self) -> String {
        match self {
            Gateway::Herald(d) => d
                .iter()
                .map(Daemon::log_tail)
                .collect::<Vec<_>>()
                .join("\n"),
            Gateway::Floor(f) => tail(&f.log),
        }
    }

    /// Allocation calls and bytes so far, per process; `None` for a Herald built without the
    /// `count-alloc` feature (its `/metrics` has no such gauge).
    pub async fn allocations(&self) -> Option<Vec<(u64, u64)>> {
        match self {
            Gateway::Herald(daemons) => {
                let http = reqwest::Client::new();
                let mut out = Vec::new();
                for d in daemons {
                    let url = format!("{}/metrics", d.spec.base_url());
                    let text = http.get(url).send().await.ok()?.text().await.ok()?;
                    let calls = gauge(&text, "herald_process_allocations")?;
                    let bytes = gauge(&text, "herald_process_allocated_bytes")?;
                    out.push((calls as u64, bytes as u64));
                }
                Some(out)
            }
            Gateway::Floor(f) => Some(vec![f.allocations()?]),
        }
    }
}

/// The value of an unlabelled gauge in Prometheus text.
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// `target/<profile>/examples/echo_floor`, beside the `herald` the driver would start.
pub fn floor_bin() -> PathBuf {
    let herald = herald_bin();
    let dir = herald.parent().expect("target/<profile>");
    dir.join("examples").join("echo_floor")
}

/// A running echo floor. Dropping it kills and reaps the process.
pub struct Floor {
    child: Child,
    bin: PathBuf,
    log: PathBuf,
    /// Ask a line, read `<calls> <bytes>`.
    pipe: Mutex<(ChildStdin, BufReader<ChildStdout>)>,
}

impl Floor {
    /// Starts `bin` against the fake Bot API at `api_url` (with `token`) and the model at
    /// `model_url`; its stderr goes to `log`.
    pub fn start(bin: &Path, api_url: &str, token: &str, model_url: &str, log: &Path) -> Floor {
        let err = std::fs::File::create(log).expect("floor log");
        let mut child = Command::new(bin)
            .args([api_url, token, model_url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "start {}: {e} (build it: cargo build --release --example echo_floor)",
                    bin.display()
                )
            });
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Floor {
            child,
            bin: bin.to_path_buf(),
            log: log.to_path_buf(),
            pipe: Mutex::new((stdin, stdout)),
        }
    }

    fn allocations(&self) -> Option<(u64, u64)> {
        let mut pipe = self.pipe.lock().unwrap_or_else(|e| e.into_inner());
        let (stdin, stdout) = &mut *pipe;
        stdin.write_all(b"\n").ok()?;
        stdin.flush().ok()?;
        let mut line = String::new();
        stdout.read_line(&mut line).ok()?;
        let mut it = line.split_whitespace().map(|v| v.parse::<u64>().ok());
        Some((it.next()??, it.next()??))
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
