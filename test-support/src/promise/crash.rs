//! The crash loop: one `herald` process under a steady chat load, SIGKILLed at random moments
//! and started again on the same store each time, then a census of what survived.
//!
//! Shared by `examples/crash_loop.rs` (many kills, JSON report) and `tests/it/crash_loop.rs`
//! (a few kills, bounded time) over the web chat API, Telegram or Discord ([`Via`]), and by the
//! conformance suite over any platform's [`Side`]. It must not soften the load around a kill:
//! clients keep retrying exactly as they would against a real outage.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{json, Value};

use super::super::fake_llm::FakeLlm;
use super::census::{self, Census, Kill};
use super::daemon::{herald_bin, Backend, Daemon, Spec};
use super::discord::DiscordChannel;
use super::load::{self, Channel, LoadSpec, WebChannel};
use super::signal::SignalChannel;
use super::slack::{SlackChannel, SlackReceipts};
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

/// A platform's side of a crash run: the way the load comes in ([`load::Channel`]), the
/// settings that point the daemon at the platform's fake, and what the people saw there. A
/// platform added to the conformance suite brings one (`run_on` takes any).
pub trait Side: Channel {
    /// What the people saw, in the platform's own terms.
    type Receipts: PeopleSaw;
    /// `HERALD_*` settings for a daemon talking to this side.
    fn daemon_env(&self) -> Vec<(String, String)>;
    /// Told the daemon's base URL before the load starts (the web posts to it).
    fn attach(&mut self, _base_url: &str) {}
    /// What the people saw, counted from the fake's records; `None` where the answer is the
    /// client's own response (the web).
    fn receipts(&self, _kills: &[Kill]) -> Option<Self::Receipts> {
        None
    }
    /// Anything else the run's report should carry about this side.
    fn report(&self) -> Value {
        Value::Null
    }
}

/// The people's view of a run, as any platform's receipts give it.
pub trait PeopleSaw: serde::Serialize {
    /// Every message answered, and no extra copy beyond what the platform's contract allows.
    fn promise_held(&self) -> bool;
    /// Messages the people sent.
    fn messages(&self) -> usize;
    fn unanswered(&self) -> usize;
    /// Extra copies explained by a kill (a platform without an idempotency key).
    fn resends_across_a_kill(&self) -> usize;
}

impl PeopleSaw for Receipts {
    fn promise_held(&self) -> bool {
        Receipts::promise_held(self)
    }
    fn messages(&self) -> usize {
        self.updates
    }
    fn unanswered(&self) -> usize {
        self.unanswered
    }
    fn resends_across_a_kill(&self) -> usize {
        self.resends_across_a_kill
    }
}

impl PeopleSaw for SlackReceipts {
    fn promise_held(&self) -> bool {
        SlackReceipts::promise_held(self)
    }
    fn messages(&self) -> usize {
        self.messages
    }
    fn unanswered(&self) -> usize {
        self.unanswered
    }
    fn resends_across_a_kill(&self) -> usize {
        self.resends_across_a_kill
    }
}

impl Side for WebChannel {
    type Receipts = Receipts;

    fn daemon_env(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    fn attach(&mut self, base_url: &str) {
        *self = WebChannel::new(vec![base_url.to_string()]);
    }
}

impl Side for TelegramChannel {
    type Receipts = Receipts;

    fn daemon_env(&self) -> Vec<(String, String)> {
        TelegramChannel::daemon_env(self)
    }

    fn receipts(&self, kills: &[Kill]) -> Option<Receipts> {
        Some(TelegramChannel::receipts(self, kills))
    }
}

impl Side for DiscordChannel {
    type Receipts = Receipts;

    fn daemon_env(&self) -> Vec<(String, String)> {
        DiscordChannel::daemon_env(self)
    }

    fn receipts(&self, kills: &[Kill]) -> Option<Receipts> {
        Some(DiscordChannel::receipts(self, kills))
    }

    fn report(&self) -> Value {
        json!({"replays": self.replays()})
    }
}

impl Side for SlackChannel {
    type Receipts = SlackReceipts;

    fn daemon_env(&self) -> Vec<(String, String)> {
        SlackChannel::daemon_env(self)
    }

    fn receipts(&self, kills: &[Kill]) -> Option<SlackReceipts> {
        Some(SlackChannel::receipts(self, kills))
    }
}

impl Side for SignalChannel {
    type Receipts = Receipts;

    fn daemon_env(&self) -> Vec<(String, String)> {
        SignalChannel::daemon_env(self)
    }

    fn receipts(&self, kills: &[Kill]) -> Option<Receipts> {
        Some(SignalChannel::receipts(self, kills))
    }

    fn report(&self) -> Value {
        json!({"replays": self.replays()})
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

pub struct CrashRun<R = Receipts> {
    pub census: Census,
    /// What the people saw (platforms with a fake: not the web).
    pub receipts: Option<R>,
    pub report: Value,
}

impl<R: PeopleSaw> CrashRun<R> {
    pub fn promise_held(&self) -> bool {
        self.census.promise_held() && self.receipts.as_ref().is_none_or(R::promise_held)
    }
}

/// Runs `spec` over the side its `via` names.
pub async fn run(spec: &CrashSpec) -> CrashRun {
    super::init();
    match spec.via {
        Via::Web => run_on(spec, WebChannel::new(Vec::new())).await,
        Via::Telegram => run_on(spec, TelegramChannel::start().await).await,
        Via::Discord => run_on(spec, DiscordChannel::start().await).await,
    }
}

/// Runs `spec` over `side` (`spec.via` is not read).
pub async fn run_on<S: Side>(spec: &CrashSpec, mut side: S) -> CrashRun<S::Receipts> {
    super::init();
    let llm = FakeLlm::start().await;
    llm.set_jitter(spec.model_jitter);
    let backend = Backend::from_env().await;
    let mut dspec = Spec::new(&herald_bin(), "crash", &backend, &llm.base_url());
    for (k, v) in side.daemon_env() {
        dspec = dspec.set(&k, &v);
    }
    side.attach(&dspec.base_url());
    let platform = side.platform();
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
    let load = tokio::spawn(load::run(side.clone(), load_spec));

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
    let drained = census::drain(&backend.url, platform, Duration::from_secs(90)).await;
    let drain_s = drain_started.elapsed().as_secs_f64();
    let log = daemon.log_tail();
    daemon.kill();

    let census = census::take(&backend.url, platform, &sent, &kills).await;
    backend.cleanup().await;
    let receipts = side.receipts(&kills);
    let held = census.promise_held() && receipts.as_ref().is_none_or(PeopleSaw::promise_held);
    if !held {
        eprintln!("last daemon log lines:\n{log}");
    }
    let mut ready_sorted = ready_ms.clone();
    ready_sorted.sort_by(|a, b| a.total_cmp(b));
    let report = json!({
        "store": backend.name(),
        "channel": platform,
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
        "side": side.report(),
        "promise_held": held,
    });
    CrashRun {
        census,
        receipts,
        report,
    }
}
