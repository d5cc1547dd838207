//! Matches every reply the fake Telegram recorded to the message that asked for it, and times
//! it: the driver registers a message (with its start instant) before it goes out, and the
//! collector task resolves it when the fake reports the `sendMessage`, through the fake's
//! notification channel (no polling, so p50 is not rounded up to a watcher's tick).
//!
//! Each message is also timed to its answer's final form: the first formatted message or edit
//! holding it (the outbox sends answers as HTML; a streamed answer's preview is plain text until
//! the outbox's final edit formats it). Without streaming the two instants are the same.
//!
//! Must not: guess. A reply to a message nobody registered counts as unexpected, a second reply
//! to one message counts as a duplicate, a registered message with no reply at the end is lost.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use crate::fake_telegram::{EditedMessage, SentMessage};

/// The fake model answers `reply to: <text>`; the text names the message.
pub const REPLY_PREFIX: &str = "reply to: ";

/// One answered message, in seconds since the run's start and milliseconds of latency.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub sent_s: f64,
    pub done_s: f64,
    pub latency_ms: f64,
}

#[derive(Default)]
struct Inner {
    waiting: HashMap<String, (Instant, Option<oneshot::Sender<()>>)>,
    /// Messages whose answer has not reached its final form yet, with when they were asked.
    unfinished: HashMap<String, Instant>,
    /// Milliseconds from asking to the answer's final form.
    finals: Vec<f64>,
    answered: HashSet<String>,
    samples: Vec<Sample>,
    duplicates: usize,
    unexpected: usize,
}

/// Shared by the senders and the collector task.
#[derive(Clone)]
pub struct Tracker {
    origin: Instant,
    inner: Arc<Mutex<Inner>>,
}

/// What a run ended with.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub samples: Vec<Sample>,
    pub lost: usize,
    pub duplicates: usize,
    pub unexpected: usize,
    /// Milliseconds from each message to its answer's final (formatted) form.
    pub finals_ms: Vec<f64>,
}

impl Inner {
    /// Whether `reply` is the beginning of the answer to a waiting message: the first
    /// preview of a streamed answer.
    fn partial(&self, reply: &str) -> bool {
        self.waiting.keys().any(|asked| {
            let whole = REPLY_PREFIX.len() + asked.len();
            reply.len() < whole && (REPLY_PREFIX.to_owned() + asked.as_str()).starts_with(reply)
        })
    }
}

impl Tracker {
    /// Starts collecting from the fake's `sendMessage` notifications; `origin` is time zero of
    /// the samples.
    pub fn start(
        mut sent: mpsc::UnboundedReceiver<(SentMessage, Instant)>,
        mut edits: mpsc::UnboundedReceiver<EditedMessage>,
    ) -> Tracker {
        let tracker = Tracker {
            origin: Instant::now(),
            inner: Arc::new(Mutex::new(Inner::default())),
        };
        let collector = tracker.clone();
        tokio::spawn(async move {
            while let Some((message, at)) = sent.recv().await {
                collector.record(&message.text, at, true);
                if message.parse_mode.is_some() {
                    collector.finished(&message.text, at);
                }
            }
        });
        let finals = tracker.clone();
        tokio::spawn(async move {
            while let Some(edit) = edits.recv().await {
                // A preview grown to the whole answer is the first sight of it.
                finals.record(&edit.text, edit.at, false);
                if edit.parse_mode.is_some() {
                    finals.finished(&edit.text, edit.at);
                }
            }
        });
        tracker
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `text` as asked at `t0` (the instant the driver hands it over, or for an
    /// open loop the instant it was due); the receiver fires when its reply is recorded.
    pub fn expect(&self, text: &str, t0: Instant) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let mut inner = self.lock();
        inner.waiting.insert(text.to_owned(), (t0, Some(tx)));
        inner.unfinished.insert(text.to_owned(), t0);
        rx
    }

    /// The chat showed `reply` at `at`: a new message (`strict`: it must answer exactly one
    /// registered message, once, unless it is a streamed preview's first part of one), or an
    /// edit (a preview that grew to the whole answer, or the final edit).
    fn record(&self, reply: &str, at: Instant, strict: bool) {
        let mut inner = self.lock();
        let asked = match reply.strip_prefix(REPLY_PREFIX) {
            Some(asked) if inner.waiting.contains_key(asked) => asked,
            _ if !strict || inner.partial(reply) => return,
            Some(asked) => asked,
            None => {
                inner.unexpected += 1;
                return;
            }
        };
        match inner.waiting.remove(asked) {
            Some((t0, done)) => {
                let sample = Sample {
                    sent_s: t0.saturating_duration_since(self.origin).as_secs_f64(),
                    done_s: at.saturating_duration_since(self.origin).as_secs_f64(),
                    latency_ms: at.saturating_duration_since(t0).as_secs_f64() * 1000.0,
                };
                inner.samples.push(sample);
                inner.answered.insert(asked.to_owned());
                if let Some(done) = done {
                    let _ = done.send(());
                }
            }
            None if inner.answered.contains(asked) => inner.duplicates += 1,
            None => inner.unexpected += 1,
        }
    }

    /// The answer to a registered message reached its final form at `at`.
    fn finished(&self, reply: &str, at: Instant) {
        let Some(asked) = reply.strip_prefix(REPLY_PREFIX) else {
            return;
        };
        let mut inner = self.lock();
        if let Some(t0) = inner.unfinished.remove(asked) {
            let ms = at.saturating_duration_since(t0).as_secs_f64() * 1000.0;
            inner.finals.push(ms);
        }
    }

    /// Messages registered and not answered yet.
    pub fn outstanding(&self) -> usize {
        self.lock().waiting.len()
    }

    /// Seconds since time zero.
    pub fn now_s(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }

    /// Takes the samples and counts so far; what is still waiting counts as lost, and the
    /// tracker starts a fresh phase (a duplicate of an earlier phase still counts later).
    pub fn take(&self) -> Tally {
        let mut inner = self.lock();
        let lost = inner.waiting.len();
        inner.waiting.clear();
        inner.unfinished.clear();
        Tally {
            samples: std::mem::take(&mut inner.samples),
            lost,
            duplicates: std::mem::take(&mut inner.duplicates),
            unexpected: std::mem::take(&mut inner.unexpected),
            finals_ms: std::mem::take(&mut inner.finals),
        }
    }
}
