//! A slow-body flood and a health prober, for the listener's end-to-end test and the example
//! that measures probe latency under the flood (`examples/slow_body_flood.rs`).
//!
//! Each flood client does what an attacker with one valid API key did: a complete request
//! head for `POST /v1/chat/completions` announcing a body it then sends one byte every few
//! seconds, dialling again 100 ms after the server closes it. The prober asks `/healthz` on a new
//! connection each time and keeps every answer and how long it took.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The pause before a flood client dials again.
const REDIAL: Duration = Duration::from_millis(100);

/// How the server answered the flood's requests: status → count (0: closed without an answer),
/// and how many 429s carried `Retry-After`.
#[derive(Debug, Default, Clone)]
pub struct Answers {
    pub by_status: BTreeMap<u16, usize>,
    pub retry_after: usize,
}

impl Answers {
    pub fn count(&self, status: u16) -> usize {
        self.by_status.get(&status).copied().unwrap_or(0)
    }

    pub fn total(&self) -> usize {
        self.by_status.values().sum()
    }
}

/// The flood's shared state: stop flag and what it saw.
#[derive(Clone, Default)]
pub struct Flood {
    stop: Arc<AtomicBool>,
    answers: Arc<Mutex<Answers>>,
}

impl Flood {
    pub fn new() -> Flood {
        Flood::default()
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn answers(&self) -> Answers {
        self.answers.lock().unwrap().clone()
    }

    /// One slow client against `addr`, until [`Flood::stop`]: a head with `key`, then a byte
    /// of the announced body every `every`.
    pub async fn client(self, addr: String, key: String, every: Duration) {
        while !self.stopped() {
            let dial = tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(&addr));
            let Ok(Ok(mut s)) = dial.await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let head = format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\n\
                 Authorization: Bearer {key}\r\nContent-Type: application/json\r\n\
                 Content-Length: 100000\r\n\r\n{{"
            );
            if s.write_all(head.as_bytes()).await.is_err() {
                continue;
            }
            let answer = self.trickle(&mut s, every).await;
            drop(s);
            if let Some(text) = answer {
                let mut a = self.answers.lock().unwrap();
                let status = status_of(&text);
                *a.by_status.entry(status).or_default() += 1;
                if status == 429 && text.to_ascii_lowercase().contains("\r\nretry-after:") {
                    a.retry_after += 1;
                }
            }
            tokio::time::sleep(REDIAL).await;
        }
    }

    /// Sends a byte every `every` until the server answers or closes; the answer's head
    /// (empty when closed without one), or `None` when stopped first.
    async fn trickle(&self, s: &mut TcpStream, every: Duration) -> Option<String> {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tokio::select! {
                r = s.read(&mut buf) => match r {
                    Ok(0) | Err(_) => return Some(String::from_utf8_lossy(&got).into_owned()),
                    Ok(n) => {
                        got.extend_from_slice(&buf[..n]);
                        // The answer's head is enough; the client hangs up.
                        if got.windows(4).any(|w| w == b"\r\n\r\n") {
                            return Some(String::from_utf8_lossy(&got).into_owned());
                        }
                    }
                },
                _ = tick.tick() => {
                    if self.stopped() {
                        return None;
                    }
                    if s.write_all(b" ").await.is_err() {
                        return Some(String::from_utf8_lossy(&got).into_owned());
                    }
                }
            }
        }
    }
}

/// The status of a raw HTTP/1.1 answer, 0 when there is none.
fn status_of(text: &str) -> u16 {
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .filter(|_| text.starts_with("HTTP/1.1 "))
        .unwrap_or(0)
}

/// One probe: its status (or the error) and how long it took.
#[derive(Debug, Clone)]
pub struct Probe {
    pub result: Result<u16, String>,
    pub took: Duration,
}

/// Asks `GET {base}/healthz` `count` times, one every `every`, each on a new connection with
/// `timeout`; every probe's answer.
pub async fn probe_health(
    base: &str,
    count: usize,
    every: Duration,
    timeout: Duration,
) -> Vec<Probe> {
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut out = Vec::new();
    let mut tick = tokio::time::interval(every);
    for _ in 0..count {
        tick.tick().await;
        let t = Instant::now();
        let result = http
            .get(format!("{base}/healthz"))
            .send()
            .await
            .map(|r| r.status().as_u16())
            .map_err(|e| e.to_string());
        out.push(Probe {
            result,
            took: t.elapsed(),
        });
    }
    out
}

/// The `p` quantile (0..=1) of `ms`, which must be sorted.
pub fn quantile(ms: &[f64], p: f64) -> f64 {
    ms[((ms.len() - 1) as f64 * p).round() as usize]
}
