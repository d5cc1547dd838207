//! The Telegram load driver: the real `herald` binary as a child process, the fake Bot API
//! server and the instant fake model in this process, and chats that talk to the daemon either
//! in a closed loop (each chat sends its next message when the previous reply arrived) or an
//! open loop (messages due at a fixed aggregate rate, whether or not earlier ones were
//! answered, so latency includes queueing).
//!
//! Shared by `benches/load.rs` (which adds reports and plots) and `tests/it/load_smoke.rs` (which
//! keeps it from rotting). It drives the daemon through this crate's `fake_telegram`, `fake_llm`
//! and `promise` (for the daemon process and the store backend).
//!
//! Must not: reach into the daemon: it sees what Telegram would see, plus /proc.

pub mod gateway;
pub mod proc;
pub mod tracker;
pub mod transport;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::fake_llm::FakeLlm;
use crate::fake_telegram::FakeTelegram;
use crate::promise::daemon::{free_port, herald_bin, Backend, Daemon, Spec};
pub use gateway::{Floor, Gateway};
#[allow(unused_imports)] // Sample is for the bench's plots.
pub use tracker::{Sample, Tally, Tracker};
pub use transport::Transport;

const TOKEN: &str = "123456:LOAD-bench-token";

/// How the messages are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// Every chat sends `messages`, each `think` after the previous reply arrived (a person
    /// reading and typing; zero for a pure closed loop).
    Closed { messages: usize, think: Duration },
    /// `rate` messages per second across the chats for `duration`; gaps are exponential
    /// (Poisson arrivals) or all equal.
    Open {
        rate: f64,
        duration: Duration,
        poisson: bool,
    },
}

#[derive(Debug, Clone)]
pub struct Plan {
    /// Chat ids `first_chat .. first_chat + chats`.
    pub chats: usize,
    pub first_chat: i64,
    pub shape: Shape,
    /// A message with no reply this long after it went out is lost.
    pub reply_timeout: Duration,
}

/// Which store a Herald run uses.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Store {
    /// Postgres when `DATABASE_URL` is set, SQLite otherwise.
    #[default]
    FromEnv,
    Sqlite,
    Postgres,
}

/// How to start a [`Rig`].
#[derive(Debug, Clone, Default)]
pub struct RigOpts {
    /// Telegram webhook mode (Herald only); polling otherwise.
    pub webhook: bool,
    /// The echo floor instead of Herald.
    pub floor: bool,
    /// The binary (default: `herald`, or `examples/echo_floor`, beside the running binary).
    pub bin: Option<PathBuf>,
    /// `HERALD_*` settings on top of the defaults and the caller's environment.
    pub env: Vec<(String, String)>,
    pub store: Store,
    /// Herald processes on one store (Postgres for more than one); 0 means 1.
    pub replicas: usize,
    /// Pins replica `i` (all its threads) to core `i % cores` with `taskset`.
    pub taskset: bool,
    /// The fake model answers after this long.
    pub model_delay: Duration,
    /// The fake model writes each answer in this many pieces over `model_delay` (0: whole).
    pub model_pieces: usize,
}

/// The gateway under load, the fakes and the way in, ready for load.
pub struct Rig {
    pub backend: Backend,
    pub tg: Arc<FakeTelegram>,
    pub llm: FakeLlm,
    pub gateway: Gateway,
    pub transport: Transport,
    pub tracker: Tracker,
    /// From spawn to the first 200 on /readyz (the floor: to its first `getUpdates`).
    pub ready_ms: f64,
    /// From spawn until the Telegram adapter polls or has registered its webhook.
    pub telegram_ready_ms: f64,
}

impl Rig {
    /// Starts the fakes and `bin` (the `herald` next to the running binary when `None`) on a
    /// fresh store: SQLite in a temp dir, or a fresh schema when `DATABASE_URL` is set. `env`
    /// adds `HERALD_*` settings; Telegram pacing is off unless `env` turns it on (the fakes have
    /// no flood limits).
    pub async fn start(
        webhook: bool,
        bin: Option<std::path::PathBuf>,
        env: &[(&str, &str)],
    ) -> Rig {
        Rig::start_with(RigOpts {
            webhook,
            bin,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..RigOpts::default()
        })
        .await
    }

    /// Starts the fakes and the gateway `opts` describe.
    pub async fn start_with(opts: RigOpts) -> Rig {
        crate::promise::init();
        let backend = match opts.store {
            Store::FromEnv => Backend::from_env().await,
            Store::Sqlite => Backend::sqlite(),
            Store::Postgres => {
                let url = std::env::var("DATABASE_URL").expect("Postgres runs need DATABASE_URL");
                Backend::postgres(&url).await
            }
        };
        let tg = Arc::new(FakeTelegram::start(TOKEN).await);
        let llm = FakeLlm::start().await;
        llm.set_default_delay(opts.model_delay);
        llm.set_default_pieces(opts.model_pieces);
        let started = Instant::now();
        let (gateway, ready_ms) = if opts.floor {
            assert!(!opts.webhook, "the echo floor polls; it has no webhook");
            let bin = opts.bin.clone().unwrap_or_else(gateway::floor_bin);
            let log = backend.dir.path().join("floor.log");
            let floor = Floor::start(&bin, &tg.url(), TOKEN, &llm.base_url(), &log);
            (Gateway::Floor(floor), 0.0)
        } else {
            start_herald(&opts, &backend, &tg, &llm).await
        };
        let deadline = started + Duration::from_secs(30);
        loop {
            let up = if opts.webhook {
                !tg.calls("setwebhook").is_empty()
            } else {
                !tg.calls("getupdates").is_empty()
            };
            if up {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the Telegram adapter never started; log:\n{}",
                gateway.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let telegram_ready_ms = started.elapsed().as_secs_f64() * 1000.0;
        let ready_ms = if opts.floor {
            telegram_ready_ms
        } else {
            ready_ms
        };
        let transport = match (&gateway, opts.webhook) {
            (Gateway::Herald(d), true) => Transport::webhook(&d[0].spec.base_url()),
            _ => Transport::Polling(tg.clone()),
        };
        let tracker = Tracker::start(tg.subscribe_sent(), tg.subscribe_edits());
        Rig {
            backend,
            tg,
            llm,
            gateway,
            transport,
            tracker,
            ready_ms,
            telegram_ready_ms,
        }
    }

    /// The first (for replicas: the first started) process's pid.
    pub fn pid(&self) -> u32 {
        self.gateway.pids()[0]
    }

    /// Runs `plan` and returns its samples; what got no reply within the timeout is lost.
    /// `grace` is waited afterwards so a late duplicate is still counted.
    pub async fn run(&self, plan: &Plan, grace: Duration) -> Outcome {
        let started_s = self.tracker.now_s();
        let send_errors = match plan.shape {
            Shape::Closed { messages, think } => self.closed(plan, messages, think).await,
            Shape::Open {
                rate,
                duration,
                poisson,
            } => self.open(plan, rate, duration, poisson).await,
        };
        tokio::time::sleep(grace).await;
        let mut tally = self.tracker.take();
        for s in &mut tally.samples {
            s.sent_s -= started_s;
            s.done_s -= started_s;
        }
        Outcome { tally, send_errors }
    }

    async fn closed(&self, plan: &Plan, messages: usize, think: Duration) -> usize {
        let mut chats = Vec::with_capacity(plan.chats);
        for i in 0..plan.chats {
            let chat = plan.first_chat + i as i64;
            let (tracker, transport, timeout) = (
                self.tracker.clone(),
                self.transport.clone(),
                plan.reply_timeout,
            );
            chats.push(tokio::spawn(async move {
                let mut errors = 0;
                for k in 0..messages {
                    if k > 0 && !think.is_zero() {
                        tokio::time::sleep(think).await;
                    }
                    let text = format!("load c{chat} m{k}");
                    let answered = tracker.expect(&text, Instant::now());
                    if transport.send(chat, &text).await.is_err() {
                        errors += 1;
                    }
                    // A timeout leaves the message registered: it is lost unless it arrives
                    // before the end.
                    let _ = tokio::time::timeout(timeout, answered).await;
                }
                errors
            }));
        }
        let mut errors = 0;
        for chat in chats {
            errors += chat.await.unwrap_or(1);
        }
        errors
    }

    async fn open(&self, plan: &Plan, rate: f64, duration: Duration, poisson: bool) -> usize {
        let start = tokio::time::Instant::now();
        let end = start + duration;
        let mut due = start;
        let mut sends = Vec::new();
        let mut k = 0usize;
        while due < end {
            tokio::time::sleep_until(due).await;
            let chat = plan.first_chat + (k % plan.chats.max(1)) as i64;
            let text = format!("load c{chat} m{k}");
            // Latency counts from when the message was due, so a driver that falls behind
            // shows up as queueing instead of hiding it.
            // Nobody waits on this message's reply; the tracker still times and counts it.
            drop(self.tracker.expect(&text, due.into_std()));
            let transport = self.transport.clone();
            sends.push(tokio::spawn(async move {
                transport.send(chat, &text).await.is_err()
            }));
            k += 1;
            let gap = if poisson {
                let u: f64 = rand::rng().random_range(f64::EPSILON..1.0);
                -u.ln() / rate
            } else {
                1.0 / rate
            };
            due += Duration::from_secs_f64(gap);
        }
        let mut errors = 0;
        for send in sends {
            errors += usize::from(send.await.unwrap_or(true));
        }
        let deadline = tokio::time::Instant::now() + plan.reply_timeout;
        while self.tracker.outstanding() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        errors
    }

    /// Stops the gateway and drops the Postgres schema, if any.
    pub async fn finish(self) {
        drop(self.gateway);
        self.backend.cleanup().await;
    }
}

/// One phase's result.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub tally: Tally,
    /// Messages the transport could not hand over (webhook never answered 200).
    pub send_errors: usize,
}

impl Outcome {
    pub fn replies(&self) -> usize {
        self.tally.samples.len()
    }

    /// Sorted latencies in milliseconds.
    pub fn latencies_ms(&self) -> Vec<f64> {
        let mut l: Vec<f64> = self.tally.samples.iter().map(|s| s.latency_ms).collect();
        l.sort_by(f64::total_cmp);
        l
    }

    /// Sorted milliseconds from each message to its answer's final form (for a streamed answer
    /// the outbox's final edit, otherwise the reply itself).
    pub fn finals_ms(&self) -> Vec<f64> {
        let mut l = self.tally.finals_ms.clone();
        l.sort_by(f64::total_cmp);
        l
    }

    /// From the first message out to the last reply in, in seconds.
    pub fn span_s(&self) -> f64 {
        let first = self
            .tally
            .samples
            .iter()
            .map(|s| s.sent_s)
            .fold(f64::MAX, f64::min);
        let last = self
            .tally
            .samples
            .iter()
            .map(|s| s.done_s)
            .fold(0.0, f64::max);
        (last - first).max(f64::EPSILON)
    }
}

/// Nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Starts `opts.replicas` Herald processes on `backend` (replica ids `load-r<i>-g0`, or
/// `load-g0` for a single one), pinned with `taskset` when asked; returns them and the first
/// one's time to ready.
async fn start_herald(
    opts: &RigOpts,
    backend: &Backend,
    tg: &FakeTelegram,
    llm: &FakeLlm,
) -> (Gateway, f64) {
    let replicas = opts.replicas.max(1);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut daemons = Vec::with_capacity(replicas);
    for i in 0..replicas {
        let name = if replicas == 1 {
            "load".to_string()
        } else {
            format!("load-r{i}")
        };
        let data_dir = backend.dir.path().join(&name);
        std::fs::create_dir_all(&data_dir).expect("data dir");
        let port = free_port();
        let spec = Spec {
            bin: opts.bin.clone().unwrap_or_else(herald_bin),
            name,
            port,
            store_url: backend.url.clone(),
            data_dir,
            llm_url: llm.base_url(),
            env: settings(opts, tg, port),
        };
        let daemon = Daemon::start(&spec, 0).await;
        if opts.taskset {
            let core = (i % cores).to_string();
            let pid = daemon.pid().to_string();
            let status = std::process::Command::new("taskset")
                .args(["-a", "-cp", &core, &pid])
                .stdout(std::process::Stdio::null())
                .status()
                .expect("run taskset");
            assert!(status.success(), "taskset -a -cp {core} {pid} failed");
        }
        daemons.push(daemon);
    }
    let ready_ms = daemons[0].ready_ms;
    (Gateway::Herald(daemons), ready_ms)
}

/// A Herald process's `HERALD_*` settings: the fakes, no pacing (the fakes have no flood
/// limits), webhook mode when asked; then the caller's environment and `opts.env` win.
fn settings(opts: &RigOpts, tg: &FakeTelegram, port: u16) -> Vec<(String, String)> {
    let base_url = format!("http://127.0.0.1:{port}");
    let mut settings: Vec<(String, String)> = vec![
        ("HERALD_TELEGRAM__TOKEN".into(), TOKEN.into()),
        ("HERALD_TELEGRAM__API_URL".into(), tg.url()),
        ("HERALD_TELEGRAM__ALLOW_ALL_USERS".into(), "true".into()),
        ("HERALD_TELEGRAM__PACING".into(), "false".into()),
    ];
    if opts.webhook {
        settings.extend([
            ("HERALD_TELEGRAM__MODE".into(), "webhook".into()),
            (
                "HERALD_TELEGRAM__WEBHOOK_URL".into(),
                format!("{base_url}/telegram/webhook"),
            ),
            (
                "HERALD_TELEGRAM__WEBHOOK_SECRET".into(),
                transport::WEBHOOK_SECRET.into(),
            ),
        ]);
    }
    let owned = [
        "HERALD_STORE__URL",
        "HERALD_LLM__BASE_URL",
        "HERALD_SERVER__REPLICA_ID",
    ];
    settings.extend(
        std::env::vars().filter(|(k, _)| k.starts_with("HERALD_") && !owned.contains(&k.as_str())),
    );
    settings.extend(opts.env.iter().cloned());
    settings
}
