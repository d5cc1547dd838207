//! The crash loop: one `herald` process under a steady chat load, SIGKILLed at random moments
//! and started again on the same store each time, then a census of what survived.
//!
//! Shared by `examples/crash_loop.rs` (many kills, JSON report) and `tests/it/crash_loop.rs`
//! (a few kills, bounded time), and the conformance suite, over the web chat API, Telegram or
//! Discord ([`Via`]). It must not soften
//! the load around a kill: clients keep retrying exactly as they would against a real outage.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{json, Value};

use super::super::fake_llm::FakeLlm;
use super::census::{self, Census, Kill};
use super::daemon::{herald_bin, Backend, Daemon, Spec};
use super::discord::DiscordChannel;
use super::load::{self, LoadSpec, WebChannel};
use super::telegram::{Receipts, TelegramChannel};

/// The way the load comes in and the replies go out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// `POST /api/v1/chat`; the answer is the API's response.
    Web,
    /// The fake Bot API server: updates through `getUpdates` (so the stored offset is crashed
    /// too), answers as the fake's recorded `sendMessage` calls (so the outbox send and
    /// `mark_sent` are crashed too).
    Telegram,
    /// The fake Discord: MESSAGE_CREATEs on its gateway, answers as its recorded channel
    /// messages (see [`DiscordChannel`] for the replay it stands in for).
    Discord,
}

/// The platform side of a run: the fake the daemon talks to, or none for the web.
enum Platform {
    Web,
    Telegram(TelegramChannel),
    Discord(DiscordChannel),
}

impl Platform {
    async fn start(via: Via) -> Platform {
        match via {
            Via::Web => Platform::Web,
            Via::Telegram => Platform::Telegram(TelegramChannel::start().await),
            Via::Discord => Platform::Discord(DiscordChannel::start().await),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Platform::Web => "web",
            Platform::Telegram(_) => "telegram",
            Platform::Discord(_) => "discord",
        }
    }

    fn daemon_env(&self) -> Vec<(String, String)> {
        match self {
            Platform::Web => Vec::new(),
            Platform::Telegram(tg) => tg.daemon_env(),
            Platform::Discord(d) => d.daemon_env(),
        }
    }

    fn load(&self, base_url: String, spec: LoadSpec) -> tokio::task::JoinHandle<Vec<load::Sent>> {
        match self {
            Platform::Web => tokio::spawn(load::run(WebChannel::new(vec![base_url]), spec)),
            Platform::Telegram(tg) => tokio::spawn(load::run(tg.clone(), spec)),
            Platform::Discord(d) => tokio::spawn(load::run(d.clone(), spec)),
        }
    }

    fn receipts(&self, kills: &[Kill]) -> Option<Receipts> {
        match self {
            Platform::Web => None,
            Platform::Telegram(tg) => Some(tg.receipts(kills)),
            Platform::Discord(d) => Some(d.receipts(kills)),
        }
    }

    /// Messages dispatched again for want of a gateway replay (Discord only).
    fn replays(&self) -> Option<usize> {
        match self {
            Platform::Discord(d) => Some(d.replays()),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct CrashSpec {
    pub lanes: usize,
    pub min_per_lane: usize,
    pub kills: usize,
    /// Each process lives a random time in this range (after it is ready) before its kill.
    pub life_ms: (u64, u64),
    /// The fake model answers after a random delay up to this.
    pub model_jitter: Duration,
    pub via: Via,
}

pub struct CrashRun {
    pub census: Census,
    /// What the people saw (Telegram and Discord runs).
    pub receipts: Option<Receipts>,
    pub report: Value,
}

impl CrashRun {
    pub fn promise_held(&self) -> bool {
        self.census.promise_held() && self.receipts.as_ref().is_none_or(Receipts::promise_held)
    }
}

pub async fn run(spec: &CrashSpec) -> CrashRun {
    super::init();
    let llm = FakeLlm::start().await;
    llm.set_jitter(spec.model_jitter);
    let backend = Backend::from_env().await;
    let platform = Platform::start(spec.via).await;
    let mut dspec = Spec::new(&herald_bin(), "crash", &backend, &llm.base_url());
    for (k, v) in platform.daemon_env() {
        dspec = dspec.set(&k, &v);
    }
    let started = Instant::now();
    let mut generation = 0;
    let mut daemon = Daemon::start(&dspec, generation).await;
    let mut ready_ms = vec![daemon.ready_ms];

    let keep_going = Arc::new(AtomicBool::new(true));
    let load_spec = LoadSpec {
        lanes: spec.lanes,
        min_per_lane: spec.min_per_lane,
        keep_going: keep_going.clone(),
        lane_prefix: "crash".into(),
        // A Telegram user waits for the reply itself, which a reply row stuck `sending` by a
        // kill holds back for the claim TTL (60 s).
        give_up: Duration::from_secs(150),
    };
    let load = platform.load(dspec.base_url(), load_spec);

    let mut kills = Vec::new();
    while kills.len() < spec.kills {
        let life = rand::rng().random_range(spec.life_ms.0..=spec.life_ms.1);
        tokio::time::sleep(Duration::from_millis(life)).await;
        let replica = Daemon::replica_id(&dspec, generation);
        daemon.kill();
        kills.push(Kill {
            replica,
            at_ms: chrono::Utc::now().timestamp_millis(),
        });
        generation += 1;
        daemon = Daemon::start(&dspec, generation).await;
        ready_ms.push(daemon.ready_ms);
    }
    keep_going.store(false, Ordering::Relaxed);
    let sent = load.await.expect("load");
    let load_s = started.elapsed().as_secs_f64();
    // A reply row claimed by a killed process stays `sending` until the sender's claim TTL
    // (60 s) runs out, and holds back the later rows of its lane: the drain may take that long.
    let drain_started = Instant::now();
    let drained = census::drain(&backend.url, platform.name(), Duration::from_secs(90)).await;
    let drain_s = drain_started.elapsed().as_secs_f64();
    let log = daemon.log_tail();
    daemon.kill();

    let census = census::take(&backend.url, platform.name(), &sent, &kills).await;
    backend.cleanup().await;
    let receipts = platform.receipts(&kills);
    let held = census.promise_held() && receipts.as_ref().is_none_or(Receipts::promise_held);
    if !held {
        eprintln!("last daemon log lines:\n{log}");
    }
    let mut ready_sorted = ready_ms.clone();
    ready_sorted.sort_by(|a, b| a.total_cmp(b));
    let report = json!({
        "store": backend.name(),
        "channel": platform.name(),
        "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        "lanes": spec.lanes,
        "min_messages_per_lane": spec.min_per_lane,
        "kills": kills.len(),
        "process_life_ms": [spec.life_ms.0, spec.life_ms.1],
        "model_jitter_ms": spec.model_jitter.as_millis() as u64,
        "wall_s": load_s,
        "messages": sent.len(),
        "answered_per_s": sent.len() as f64 / load_s,
        "latency_ms_including_outages": load::percentiles(&sent),
        "restart_ready_ms": {"min": ready_sorted.first(), "max": ready_sorted.last()},
        "drained": drained,
        "drain_s_after_load": drain_s,
        "model_requests": llm.request_count(),
        "census": census,
        "receipts": receipts,
        "discord_replays": platform.replays(),
        "promise_held": held,
    });
    CrashRun {
        census,
        receipts,
        report,
    }
}
