//! The client side of the promise runs: N lanes, each sending its messages one after the other,
//! all lanes at once, and each message retried with the same client id until the daemon
//! answers — through kills, restarts and replica changes. The retry is what a real client (or
//! a platform redelivering an update) does; the dedupe key makes it safe.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{json, Value};

/// The inbox id of an answer whose channel cannot see it (Telegram: the user only sees the
/// reply); the census reads the id and the status from the store by the platform id instead.
pub const UNRESOLVED: i64 = 0;

/// What the daemon said when it finally accepted and answered a message.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The inbox row's id, or [`UNRESOLVED`].
    pub inbox_id: i64,
    /// `done` or `failed`; empty when unresolved.
    pub status: String,
    pub reply: String,
}

/// A way in for chat messages. `deliver` makes one attempt; `Err` means "try again" (the
/// connection died, the daemon is restarting, the answer is not ready yet).
///
/// Web: `POST /api/v1/chat` with a `client_id`. Telegram ([`super::telegram`]): the update is
/// pushed once into the fake Bot API server (it stays queued there until the daemon confirms
/// it, so a crash redelivers it, as on Telegram) and an attempt waits for the fake to record a
/// `sendMessage` answering it; the inbox id then comes from the census by platform id.
pub trait Channel: Clone + Send + Sync + 'static {
    fn platform(&self) -> &'static str;
    /// The lane key the daemon files lane number `index` under.
    fn lane(&self, prefix: &str, index: usize) -> String {
        format!("{}:{prefix}{index}", self.platform())
    }
    /// The id the store dedupes this message on (`inbox.platform_message_id`).
    fn platform_id(&self, client_id: &str) -> String {
        client_id.to_string()
    }
    fn deliver(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> impl Future<Output = Result<Answer, String>> + Send;
}

/// The web chat API of one or several replicas, used round robin: every attempt goes to the
/// next replica, so a dead one only costs an attempt.
#[derive(Clone)]
pub struct WebChannel {
    bases: Arc<Vec<String>>,
    next: Arc<AtomicUsize>,
    http: reqwest::Client,
}

impl WebChannel {
    pub fn new(bases: Vec<String>) -> WebChannel {
        WebChannel {
            bases: Arc::new(bases),
            next: Arc::new(AtomicUsize::new(0)),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .pool_max_idle_per_host(64)
                .build()
                .expect("http client"),
        }
    }
}

impl Channel for WebChannel {
    fn platform(&self) -> &'static str {
        "web"
    }

    fn deliver(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> impl Future<Output = Result<Answer, String>> + Send {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.bases.len();
        let url = format!("{}/api/v1/chat", self.bases[i]);
        let body = json!({"lane": lane, "text": text, "client_id": client_id});
        let http = self.http.clone();
        async move {
            let r = http
                .post(&url)
                .json(&body)
                .send()
                .await
                .map_err(|e| format!("send: {e}"))?;
            let status = r.status().as_u16();
            let v: Value = r.json().await.map_err(|e| format!("body: {e}"))?;
            if status != 200 {
                return Err(format!("HTTP {status}: {v}"));
            }
            Ok(Answer {
                inbox_id: v["inbox_id"].as_i64().ok_or("no inbox_id")?,
                status: v["status"].as_str().unwrap_or_default().to_string(),
                reply: v["reply"].as_str().unwrap_or_default().to_string(),
            })
        }
    }
}

/// One message as the client saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Sent {
    pub lane: String,
    /// The id the store dedupes on: the client id on the web, `<chat>:<message>` on Telegram.
    pub client_id: String,
    pub text: String,
    pub inbox_id: i64,
    pub status: String,
    pub reply: String,
    /// Attempts until the answer (1 = no retry).
    pub attempts: u32,
    /// From the first attempt to the answer.
    pub latency_ms: f64,
}

#[derive(Clone)]
pub struct LoadSpec {
    pub lanes: usize,
    /// Each lane sends at least this many messages…
    pub min_per_lane: usize,
    /// …and keeps sending new ones while `keep_going` is set (so kills always land under load).
    pub keep_going: Arc<AtomicBool>,
    pub lane_prefix: String,
    /// Give up on one message after this long (a broken promise, reported, not a hang).
    pub give_up: Duration,
}

/// Runs the load to completion and returns every message with its answer, lane by lane in
/// send order. Messages that never got an answer come back with `inbox_id` -1.
pub async fn run<C: Channel>(channel: C, spec: LoadSpec) -> Vec<Sent> {
    let mut tasks = Vec::new();
    for l in 0..spec.lanes {
        let channel = channel.clone();
        let spec = spec.clone();
        tasks.push(tokio::spawn(async move {
            let lane = channel.lane(&spec.lane_prefix, l);
            let mut sent = Vec::new();
            let mut i = 0;
            while i < spec.min_per_lane || spec.keep_going.load(Ordering::Relaxed) {
                let text = format!("lane {l} message {i}");
                let client_id = format!("{}-{l}-{i}", spec.lane_prefix);
                sent.push(one(&channel, &lane, &client_id, &text, spec.give_up).await);
                i += 1;
            }
            sent
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("lane task"));
    }
    all
}

async fn one<C: Channel>(
    channel: &C,
    lane: &str,
    client_id: &str,
    text: &str,
    give_up: Duration,
) -> Sent {
    let started = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let outcome = channel.deliver(lane, client_id, text).await;
        let done = |inbox_id: i64, status: String, reply: String| Sent {
            lane: lane.to_string(),
            client_id: channel.platform_id(client_id),
            text: text.to_string(),
            inbox_id,
            status,
            reply,
            attempts,
            latency_ms: super::ms_since(started),
        };
        match outcome {
            Ok(a) => return done(a.inbox_id, a.status, a.reply),
            Err(e) if started.elapsed() > give_up => {
                return done(-1, "unanswered".into(), e);
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Latency percentiles (ms) of the answered messages.
pub fn percentiles(sent: &[Sent]) -> Value {
    let mut v: Vec<f64> = sent
        .iter()
        .filter(|s| s.inbox_id >= 0)
        .map(|s| s.latency_ms)
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    let p = |q: f64| {
        if v.is_empty() {
            0.0
        } else {
            v[((v.len() as f64 - 1.0) * q).round() as usize]
        }
    };
    json!({"p50": p(0.5), "p90": p(0.9), "p99": p(0.99), "max": p(1.0)})
}
