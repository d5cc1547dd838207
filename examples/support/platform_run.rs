//! One measured run of `examples/bench_platforms.rs`: the real daemon on a fresh store, one
//! platform's wire fake, the instant fake model, and the promise harness's closed-loop load
//! (`promise::load::run`) through that platform's promise channel.
//!
//! Kept apart from the driver so the driver holds only arguments, medians and the report. The
//! latency counted here is the one a person feels: from the instant the message was handed to
//! the fake platform to the instant the fake recorded the bot's reply (Telegram: the fake's
//! `subscribe_sent` stamp; Slack: the `chat.postMessage` record's own instant; WhatsApp: the
//! fake Cloud API's record of the message quoting the person's). The client's
//! view (the harness polls the fake every 20 ms) is reported beside it.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::promise::crash::Side;
use herald_test_support::promise::daemon::{Backend, Daemon, Spec};
use herald_test_support::promise::load::{self, Answer, Channel, LoadSpec, Sent};
use herald_test_support::promise::signal::SignalChannel;
use herald_test_support::promise::slack::SlackChannel;
use herald_test_support::promise::telegram::TelegramChannel;
use herald_test_support::promise::whatsapp::WhatsAppChannel;
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    Telegram,
    Slack,
    Signal,
    WhatsApp,
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::Telegram => "telegram",
            Platform::Slack => "slack",
            Platform::Signal => "signal",
            Platform::WhatsApp => "whatsapp",
        }
    }
}

/// The same load for every platform.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    pub lanes: usize,
    pub messages: usize,
}

/// The lane prefix (and client id prefix) of the warm-up messages.
const WARM: &str = "warm-up";

/// A promise channel that notes when each message was first handed over, by the platform id
/// the store dedupes on (the id exists once the inner channel pushed the message).
#[derive(Clone)]
struct Timed<C> {
    inner: C,
    handed: Arc<Mutex<HashMap<String, Instant>>>,
}

impl<C: Channel> Channel for Timed<C> {
    fn platform(&self) -> &'static str {
        self.inner.platform()
    }

    fn lane(&self, prefix: &str, index: usize) -> String {
        self.inner.lane(prefix, index)
    }

    fn platform_id(&self, client_id: &str) -> String {
        self.inner.platform_id(client_id)
    }

    fn deliver(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> impl Future<Output = Result<Answer, String>> + Send {
        let now = Instant::now();
        // The harness writes "lane L message I" whatever the prefix; a warm-up message must not
        // read like the measured one (Slack's receipts match a DM's reply by its text).
        let text = match client_id.starts_with(WARM) {
            true => format!("{WARM}: {text}"),
            false => text.to_string(),
        };
        let (this, lane, client_id) = (self.clone(), lane.to_string(), client_id.to_string());
        async move {
            // The inner channel pushes the message when `deliver` is called, before awaiting.
            let attempt = this.inner.deliver(&lane, &client_id, &text);
            let id = this.inner.platform_id(&client_id);
            this.handed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(id)
                .or_insert(now);
            attempt.await
        }
    }
}

/// (chat, message replied to) → when the fake recorded each reply to it.
type Replies = Arc<Mutex<HashMap<(i64, i64), Vec<Instant>>>>;

/// The platform's fake, started, with the settings a daemon needs to use it.
enum Fake {
    Telegram {
        channel: TelegramChannel,
        replies: Replies,
    },
    Slack(SlackChannel),
    Signal(SignalChannel),
    WhatsApp(WhatsAppChannel),
}

impl Fake {
    async fn start(platform: Platform) -> (Fake, Vec<(String, String)>) {
        match platform {
            Platform::Telegram => {
                let channel = TelegramChannel::start().await;
                let mut env = channel.daemon_env();
                env.extend(unpaced("HERALD_TELEGRAM__PACING"));
                let replies: Replies = Arc::new(Mutex::new(HashMap::new()));
                let mut sent = channel.fake().subscribe_sent();
                let into = replies.clone();
                tokio::spawn(async move {
                    while let Some((m, at)) = sent.recv().await {
                        if let Some(to) = m.reply_to {
                            let mut r = into.lock().unwrap_or_else(|e| e.into_inner());
                            r.entry((m.chat_id, to)).or_default().push(at);
                        }
                    }
                });
                (Fake::Telegram { channel, replies }, env)
            }
            Platform::Slack => {
                let channel = SlackChannel::start().await;
                let mut env = channel.daemon_env();
                env.extend(unpaced("HERALD_SLACK__PACING"));
                (Fake::Slack(channel), env)
            }
            // signal-cli paces nothing itself; Herald honours Signal's rate limits as they come.
            Platform::Signal => {
                let channel = SignalChannel::start().await;
                let env = channel.daemon_env();
                (Fake::Signal(channel), env)
            }
            Platform::WhatsApp => {
                let channel = WhatsAppChannel::start().await;
                let mut env = channel.daemon_env();
                env.extend(unpaced("HERALD_WHATSAPP__PACING"));
                (Fake::WhatsApp(channel), env)
            }
        }
    }

    /// Told the daemon's address before it starts (WhatsApp's webhooks go there).
    fn attach(&mut self, base_url: &str) {
        if let Fake::WhatsApp(channel) = self {
            channel.attach(base_url);
        }
    }

    async fn load(
        &self,
        spec: LoadSpec,
        handed: &Arc<Mutex<HashMap<String, Instant>>>,
    ) -> Vec<Sent> {
        let handed = handed.clone();
        match self {
            Fake::Telegram { channel, .. } => {
                let inner = channel.clone();
                load::run(Timed { inner, handed }, spec).await
            }
            Fake::Slack(channel) => {
                let inner = channel.clone();
                load::run(Timed { inner, handed }, spec).await
            }
            Fake::Signal(channel) => {
                let inner = channel.clone();
                load::run(Timed { inner, handed }, spec).await
            }
            Fake::WhatsApp(channel) => {
                let inner = channel.clone();
                load::run(Timed { inner, handed }, spec).await
            }
        }
    }

    /// When the fake recorded the first reply to the message with this platform id.
    fn replied_at(&self, platform_id: &str, text: &str) -> Option<Instant> {
        match self {
            Fake::Telegram { replies, .. } => {
                let (chat, message) = platform_id.split_once(':')?;
                let key = (chat.parse().ok()?, message.parse().ok()?);
                let r = replies.lock().unwrap_or_else(|e| e.into_inner());
                r.get(&key).and_then(|v| v.first().copied())
            }
            Fake::Slack(channel) => {
                let (chan, ts) = platform_id.split_once('/')?;
                let expected = format!("reply to: {text}");
                channel
                    .fake()
                    .posted_in(chan)
                    .into_iter()
                    .find(|p| p.thread_ts.as_deref() == Some(ts) || p.text.trim() == expected)
                    .map(|p| p.at)
            }
            Fake::Signal(channel) => {
                // `<author>/<timestamp>`: the first send quoting that timestamp.
                let ts: u64 = platform_id.rsplit_once('/')?.1.parse().ok()?;
                channel
                    .fake()
                    .sent()
                    .into_iter()
                    .find(|s| s.edit_of.is_none() && s.quote.as_ref().is_some_and(|q| q.0 == ts))
                    .map(|s| s.at)
            }
            Fake::WhatsApp(channel) => channel
                .fake()
                .sent()
                .into_iter()
                .find(|s| s.context.as_deref() == Some(platform_id))
                .map(|s| s.at),
        }
    }

    /// (messages the fake was given, lost, duplicated, the receipts as recorded).
    fn receipts(&self) -> (usize, usize, usize, Value) {
        match self {
            Fake::Telegram { channel, .. } => {
                let r = channel.receipts(&[]);
                let v = serde_json::to_value(&r).expect("receipts");
                (r.updates, r.unanswered, r.answered_more_than_once, v)
            }
            Fake::Slack(channel) => {
                let r = channel.receipts(&[]);
                let mut v = serde_json::to_value(&r).expect("receipts");
                // Web API calls by method over the whole run (warm-up included): what each
                // message costs on Slack's side.
                let mut calls = serde_json::Map::new();
                for c in channel.fake().all_calls() {
                    let n = calls.get(&c.method).and_then(Value::as_u64).unwrap_or(0);
                    calls.insert(c.method, json!(n + 1));
                }
                v["web_api_calls"] = Value::Object(calls);
                let dup = r.answered_more_than_once.max(r.resends);
                (r.messages, r.unanswered, dup, v)
            }
            Fake::Signal(channel) => {
                let r = channel.receipts(&[]);
                let v = serde_json::to_value(&r).expect("receipts");
                (r.updates, r.unanswered, r.answered_more_than_once, v)
            }
            Fake::WhatsApp(channel) => {
                let r = channel.receipts(&[]);
                let v = serde_json::to_value(&r).expect("receipts");
                (r.updates, r.unanswered, r.answered_more_than_once, v)
            }
        }
    }
}

/// The platform's pacing switched off, unless the caller's environment sets it (then
/// `Spec::new` passes the caller's value on): `HERALD_SLACK__PACING=true` measures the pace.
fn unpaced(key: &str) -> Option<(String, String)> {
    std::env::var_os(key)
        .is_none()
        .then(|| (key.to_string(), "false".to_string()))
}

/// CPU seconds (user + system) the process has used, from `/proc/<pid>/stat`.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at `state`, field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after `state`; 100 ticks a second.
    (ticks(11) + ticks(12)) / 100.0
}

fn load_spec(lanes: usize, per_lane: usize, prefix: &str) -> LoadSpec {
    LoadSpec {
        lanes,
        min_per_lane: per_lane,
        keep_going: Arc::new(AtomicBool::new(false)),
        lane_prefix: prefix.into(),
        give_up: Duration::from_secs(60),
    }
}

/// One run: a warm-up message per lane (the adapter connected, the lanes and sessions made),
/// a pause that refills any per-chat pace bucket, then the measured load.
pub async fn run(platform: Platform, bin: &Path, size: Load) -> Value {
    let llm = FakeLlm::start().await;
    let backend = Backend::from_env().await;
    let (mut fake, env) = Fake::start(platform).await;
    let mut spec = Spec::new(bin, platform.name(), &backend, &llm.base_url());
    for (k, v) in env {
        spec = spec.set(&k, &v);
    }
    fake.attach(&spec.base_url());
    let daemon = Daemon::start(&spec, 0).await;
    let handed = Arc::new(Mutex::new(HashMap::new()));
    let warm = fake.load(load_spec(size.lanes, 1, WARM), &handed).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    let cpu_before = cpu_s(daemon.pid());
    let driver_before = cpu_s(std::process::id());
    let started = Instant::now();
    let sent = fake
        .load(load_spec(size.lanes, size.messages, "bench"), &handed)
        .await;
    let wall_s = started.elapsed().as_secs_f64();
    let cpu = cpu_s(daemon.pid()) - cpu_before;
    // The driver (both fakes, the model and the harness's 20 ms polling) shares the two cores.
    let driver_cpu = cpu_s(std::process::id()) - driver_before;
    // Late copies of a reply would show up here as duplicates.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = daemon.log_tail();
    daemon.kill();
    backend.cleanup().await;

    let handed = handed.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut unmatched = 0;
    let recorded: Vec<Sent> = sent
        .iter()
        .filter(|s| s.inbox_id >= 0)
        .filter_map(|s| {
            let at = handed
                .get(&s.client_id)
                .zip(fake.replied_at(&s.client_id, &s.text))
                .map(|(h, r)| r.saturating_duration_since(*h));
            if at.is_none() {
                unmatched += 1;
            }
            let mut s = s.clone();
            s.latency_ms = at?.as_secs_f64() * 1000.0;
            Some(s)
        })
        .collect();
    let (given, lost, duplicated, receipts) = fake.receipts();
    let unanswered = sent.iter().filter(|s| s.inbox_id < 0).count();
    if lost + duplicated + unanswered + unmatched > 0 {
        eprintln!(
            "{} run broke the promise; daemon log tail:\n{log}",
            platform.name()
        );
    }
    json!({
        "platform": platform.name(),
        "store": backend.name(),
        "lanes": size.lanes,
        "messages": sent.len(),
        "warm_up_messages": warm.len(),
        "wall_s": wall_s,
        "turns_per_s": sent.len() as f64 / wall_s,
        "latency_ms": load::percentiles(&recorded),
        "latency_ms_client_polling": load::percentiles(&sent),
        "latency_unmatched": unmatched,
        "messages_given_to_fake": given,
        "lost": lost.max(unanswered),
        "duplicated": duplicated,
        "daemon_cpu_s": cpu,
        "daemon_cpu_ms_per_turn": cpu * 1000.0 / sent.len().max(1) as f64,
        "driver_cpu_s": driver_cpu,
        "model_requests": llm.request_count(),
        "receipts": receipts,
    })
}
