//! The crash loop: one `herald` process under a steady chat load, SIGKILLed at random moments
//! and started again on the same store each time, then a census of what survived.
//!
//! Shared by `examples/crash_loop.rs` (many kills, JSON report) and `tests/it/crash_loop.rs`
//! (a few kills, bounded time), over the web chat API, Telegram or Slack ([`Via`]). It must not soften
//! the load around a kill: clients keep retrying exactly as they would against a real outage.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{json, Value};

use super::super::fake_llm::FakeLlm;
use super::census::{self, Census, Kill};
use super::daemon::{herald_bin, Backend, Daemon, Spec};
use super::load::{self, LoadSpec, WebChannel};
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
    /// The fake Slack in Socket Mode: each message an envelope pending until acknowledged (so
    /// the acknowledgement after the inbox write is crashed too), answers as the fake's
    /// recorded `chat.postMessage` calls (so the metadata look-up before a resend is too).
    Slack,
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
    /// What the Telegram users saw (Telegram runs only).
    pub receipts: Option<Receipts>,
    /// What the Slack users saw (Slack runs only).
    pub slack_receipts: Option<SlackReceipts>,
    pub report: Value,
}

impl CrashRun {
    pub fn promise_held(&self) -> bool {
        self.census.promise_held()
            && self.receipts.as_ref().is_none_or(Receipts::promise_held)
            && self
                .slack_receipts
                .as_ref()
                .is_none_or(SlackReceipts::promise_held)
    }
}

pub async fn run(spec: &CrashSpec) -> CrashRun {
    super::init();
    let llm = FakeLlm::start().await;
    llm.set_jitter(spec.model_jitter);
    let backend = Backend::from_env().await;
    let telegram = match spec.via {
        Via::Telegram => Some(TelegramChannel::start().await),
        _ => None,
    };
    let slack = match spec.via {
        Via::Slack => Some(SlackChannel::start().await),
        _ => None,
    };
    let mut dspec = Spec::new(&herald_bin(), "crash", &backend, &llm.base_url());
    let env = telegram
        .iter()
        .flat_map(TelegramChannel::daemon_env)
        .chain(slack.iter().flat_map(SlackChannel::daemon_env));
    for (k, v) in env {
        dspec = dspec.set(&k, &v);
    }
    let platform = match spec.via {
        Via::Web => "web",
        Via::Telegram => "telegram",
        Via::Slack => "slack",
    };
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
    let load = match (&telegram, &slack) {
        (Some(tg), _) => tokio::spawn(load::run(tg.clone(), load_spec)),
        (_, Some(sl)) => tokio::spawn(load::run(sl.clone(), load_spec)),
        _ => tokio::spawn(load::run(
            WebChannel::new(vec![dspec.base_url()]),
            load_spec,
        )),
    };

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
    let receipts = telegram.as_ref().map(|tg| tg.receipts(&kills));
    let slack_receipts = slack.as_ref().map(|sl| sl.receipts(&kills));
    let held = census.promise_held()
        && receipts.as_ref().is_none_or(Receipts::promise_held)
        && slack_receipts
            .as_ref()
            .is_none_or(SlackReceipts::promise_held);
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
        "telegram": receipts,
        "slack": slack_receipts,
        "promise_held": held,
    });
    CrashRun {
        census,
        receipts,
        slack_receipts,
        report,
    }
}
