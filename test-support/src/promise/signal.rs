//! The Signal way in for the promise runs: lane `i` is the direct chat of the person
//! `+1555020iiii` with the bot on the fake signal-cli daemon, each message one envelope on its
//! event stream, and the answer whatever the fake recorded from `send` quoting that message —
//! the people's view, independent of the store the census reads.
//!
//! The stream has no acknowledgement and no replay: an envelope written to a process that died
//! before its inbox write is gone (as it would be from signal-cli's stream). The channel stands
//! in for the person who sends again, with the same envelope (same author and timestamp, so the
//! inbox dedupes it): a message still unanswered when an attempt gives up is written again,
//! only while a daemon's stream is open. What is under test is the inbox's dedupe on
//! (author, timestamp) and the outbox's exactly-once; signal-cli has no idempotency key, so a
//! kill between the daemon taking a reply and `mark_sent` sends it again, and the receipts
//! count such resends against the kills.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::super::fake_signal::{FakeSignal, Person};
use super::attempt::{await_reply, daemon_env, Pushed};
use super::census::Kill;
use super::load::{Answer, Channel};
use super::receipts::Receipts;

/// The person of lane `index`.
pub fn lane_person(index: usize) -> Person {
    Person::new(&format!("+1555020{index:04}"), &format!("Lane {index}"))
}

#[derive(Clone)]
pub struct SignalChannel {
    fake: Arc<FakeSignal>,
    /// client id → (lane index, timestamp) of the message injected for it.
    pushed: Pushed<(usize, u64)>,
    /// Envelopes written, first ones and replays.
    writes: Arc<AtomicUsize>,
}

impl SignalChannel {
    pub async fn start() -> SignalChannel {
        SignalChannel {
            fake: Arc::new(FakeSignal::start().await),
            pushed: Pushed::default(),
            writes: Arc::default(),
        }
    }

    /// Settings for a daemon on this fake, answering everyone.
    pub fn daemon_env(&self) -> Vec<(String, String)> {
        daemon_env(vec![
            ("HERALD_SIGNAL__URL", self.fake.url()),
            ("HERALD_SIGNAL__ACCOUNT", self.fake.bot().number),
            ("HERALD_SIGNAL__ALLOW_ALL_USERS", "true".into()),
        ])
    }

    pub fn fake(&self) -> &FakeSignal {
        &self.fake
    }

    /// Envelopes written beyond the first of each message: the person's resends.
    pub fn replays(&self) -> usize {
        let pushed = self.pushed.lock().len();
        self.writes.load(Ordering::Relaxed).saturating_sub(pushed)
    }

    /// The (lane, timestamp) for `client_id`, injecting its message the first time.
    fn push_once(&self, lane: &str, client_id: &str, text: &str) -> Result<(usize, u64), String> {
        let index: usize = lane
            .strip_prefix("signal:1555020")
            .and_then(|i| i.parse().ok())
            .ok_or_else(|| format!("not a lane of this channel: {lane}"))?;
        let mut pushed = self.pushed.lock();
        if let Some(ids) = pushed.get(client_id) {
            return Ok(*ids);
        }
        let ts = self.fake.dm(&lane_person(index), text);
        self.writes.fetch_add(1, Ordering::Relaxed);
        pushed.insert(client_id.to_string(), (index, ts));
        Ok((index, ts))
    }

    /// Counts what the people saw: replies per message (the send quoting it), and each extra
    /// copy placed against the kills.
    pub fn receipts(&self, kills: &[Kill]) -> Receipts {
        let pushed = self.pushed.all();
        let sends: Vec<(Option<(usize, u64)>, i64)> = self
            .fake
            .sent()
            .into_iter()
            .filter(|s| s.edit_of.is_none())
            .map(|s| {
                let to = s.quote.as_ref().and_then(|(ts, _)| {
                    pushed
                        .iter()
                        .find(|(i, t)| t == ts && lane_person(*i).number == s.chat)
                        .copied()
                });
                (to, s.at_ms)
            })
            .collect();
        Receipts::count(&pushed, &sends, kills)
    }
}

impl Channel for SignalChannel {
    fn platform(&self) -> &'static str {
        "signal"
    }

    fn lane(&self, _prefix: &str, index: usize) -> String {
        format!("signal:{}", &lane_person(index).number[1..])
    }

    fn platform_id(&self, client_id: &str) -> String {
        self.pushed.platform_id(client_id, |(i, ts)| {
            format!("{}/{ts}", lane_person(*i).uuid)
        })
    }

    fn deliver(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> impl Future<Output = Result<Answer, String>> + Send {
        let first = self.pushed.lock().get(client_id).is_none();
        let ids = self.push_once(lane, client_id, text);
        let me = self.clone();
        async move {
            let (index, ts) = ids?;
            let person = lane_person(index);
            let reply = || {
                me.fake
                    .sent_to(&person.number)
                    .into_iter()
                    .find(|s| s.quote.as_ref().is_some_and(|(q, _)| *q == ts))
                    .map(|s| s.message)
            };
            if !first && reply().is_none() {
                if me.fake.open_streams() == 0 {
                    return Err("no daemon on the event stream".into());
                }
                me.fake.replay(&person, ts);
                me.writes.fetch_add(1, Ordering::Relaxed);
            }
            await_reply(format!("{}/{ts}", person.number), reply).await
        }
    }
}
