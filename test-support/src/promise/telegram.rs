//! The Telegram way in for the promise runs: each lane is a private chat with the fake Bot API
//! server, each message an update the daemon must fetch with `getUpdates`, and the answer is
//! whatever the fake recorded from `sendMessage` — the user-visible truth, independent of the
//! store the census reads.
//!
//! An update is pushed once and stays queued in the fake until the daemon's offset confirms
//! it, as on Telegram, so a killed poller's successor re-reads it; the channel never re-pushes.
//! Telegram has no idempotency key on `sendMessage`, so a crash between Telegram accepting a
//! chunk and our `mark_sent` commit sends that chunk again. [`Receipts`] counts such resends and
//! checks each one straddles a kill; it must not hide them by deduplicating.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::super::fake_telegram::{message_json, FakeTelegram};
use super::census::Kill;
use super::load::{Answer, Channel, UNRESOLVED};

pub const TOKEN: &str = "4242:promise-token";
/// Private chats (and their users) start here; lane `i` is chat `FIRST_CHAT + i`.
const FIRST_CHAT: i64 = 7000;
/// How long one delivery attempt waits for the reply before the client looks again.
const ATTEMPT_WAIT: Duration = Duration::from_secs(2);
/// How late the watcher may stamp a send that happened just before a kill.
const STAMP_SLACK_MS: i64 = 50;

#[derive(Clone)]
pub struct TelegramChannel {
    fake: Arc<FakeTelegram>,
    /// client id → (chat, message id) of the update pushed for it.
    pushed: Arc<Mutex<HashMap<String, (i64, i64)>>>,
    /// Epoch-ms when the watcher first saw each recorded `sendMessage`, by index.
    stamps: Arc<Mutex<Vec<i64>>>,
    stop: CancellationToken,
}

impl TelegramChannel {
    /// Starts the fake Bot API server and a watcher that time-stamps every send it records.
    pub async fn start() -> TelegramChannel {
        let fake = Arc::new(FakeTelegram::start(TOKEN).await);
        let stamps = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        // Weak: the watcher ends with the last clone of the channel, or at `receipts`.
        let (f, st, cancel) = (Arc::downgrade(&fake), stamps.clone(), stop.clone());
        tokio::spawn(async move {
            while !cancel.is_cancelled() {
                let Some(f) = f.upgrade() else { return };
                let n = f.sent_messages().len();
                drop(f);
                let now = chrono::Utc::now().timestamp_millis();
                {
                    let mut st = st.lock().unwrap_or_else(|e| e.into_inner());
                    while st.len() < n {
                        st.push(now);
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        TelegramChannel {
            fake,
            pushed: Arc::new(Mutex::new(HashMap::new())),
            stamps,
            stop,
        }
    }

    /// Settings for a daemon polling this fake.
    pub fn daemon_env(&self) -> Vec<(String, String)> {
        [
            ("HERALD_TELEGRAM__TOKEN", TOKEN.to_string()),
            ("HERALD_TELEGRAM__API_URL", self.fake.url()),
            ("HERALD_TELEGRAM__MODE", "polling".into()),
            ("HERALD_TELEGRAM__ALLOW_ALL_USERS", "true".into()),
            ("HERALD_TELEGRAM__POLL_TIMEOUT_SECS", "5".into()),
            ("HERALD_PAIRING__ENABLED", "false".into()),
            // The receipts count one sent message per answer: unstreamed.
            ("HERALD_STREAMING__ENABLED", "false".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    pub fn fake(&self) -> &FakeTelegram {
        &self.fake
    }

    /// Pushes the update for `client_id` unless it already was; returns (chat, message id).
    fn push_once(&self, lane: &str, client_id: &str, text: &str) -> Result<(i64, i64), String> {
        let chat: i64 = lane
            .strip_prefix("telegram:")
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("not a private chat lane: {lane}"))?;
        // Held across the push: update ids must reach the fake in the order they were given
        // out, or the daemon's offset could confirm a later update past an earlier one.
        let mut pushed = self.pushed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&ids) = pushed.get(client_id) {
            return Ok(ids);
        }
        let mut message_id = 0;
        self.fake.push_message(|id| {
            message_id = id;
            message_json(id, chat, chat, text)
        });
        pushed.insert(client_id.to_string(), (chat, message_id));
        Ok((chat, message_id))
    }

    /// Counts what the users saw: replies per update, resends and where they fell.
    pub fn receipts(&self, kills: &[Kill]) -> Receipts {
        self.stop.cancel();
        let sent = self.fake.sent_messages();
        let stamps = self
            .stamps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let stamp = |i: usize| stamps.get(i).copied().unwrap_or(i64::MAX);
        let pushed = self
            .pushed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut r = Receipts {
            updates: pushed.len(),
            sends: sent.len(),
            ..Receipts::default()
        };
        let mut replies: HashMap<(i64, i64), Vec<usize>> = HashMap::new();
        for (i, m) in sent.iter().enumerate() {
            match m.reply_to {
                Some(to) if pushed.values().any(|&ids| ids == (m.chat_id, to)) => {
                    replies.entry((m.chat_id, to)).or_default().push(i)
                }
                _ => r.sends_not_replies += 1,
            }
        }
        for ids in pushed.values() {
            let copies = replies.get(ids).map(Vec::as_slice).unwrap_or_default();
            match copies {
                [] => r.unanswered += 1,
                [_] => r.answered_exactly_once += 1,
                [first, rest @ ..] => {
                    r.answered_more_than_once += 1;
                    for &again in rest {
                        // A resend is explained by the documented window when the first copy
                        // went out before some kill and the copy after it.
                        let straddles = kills.iter().any(|k| {
                            stamp(*first) <= k.at_ms + STAMP_SLACK_MS && stamp(again) >= k.at_ms
                        });
                        if straddles {
                            r.resends_across_a_kill += 1;
                        } else {
                            r.resends_without_a_kill += 1;
                            if r.details.len() < 20 {
                                r.details.push(format!(
                                    "chat {} message {} answered again at {} (first at {})",
                                    ids.0,
                                    ids.1,
                                    stamp(again),
                                    stamp(*first)
                                ));
                            }
                        }
                    }
                }
            }
        }
        r
    }
}

impl Channel for TelegramChannel {
    fn platform(&self) -> &'static str {
        "telegram"
    }

    fn lane(&self, _prefix: &str, index: usize) -> String {
        format!("telegram:{}", FIRST_CHAT + index as i64)
    }

    fn platform_id(&self, client_id: &str) -> String {
        let pushed = self.pushed.lock().unwrap_or_else(|e| e.into_inner());
        match pushed.get(client_id) {
            Some((chat, message)) => format!("{chat}:{message}"),
            None => client_id.to_string(),
        }
    }

    fn deliver(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> impl Future<Output = Result<Answer, String>> + Send {
        let pushed = self.push_once(lane, client_id, text);
        let fake = self.fake.clone();
        async move {
            let (chat, message_id) = pushed?;
            let deadline = tokio::time::Instant::now() + ATTEMPT_WAIT;
            loop {
                let reply = fake
                    .sent_messages()
                    .into_iter()
                    .find(|m| m.chat_id == chat && m.reply_to == Some(message_id));
                if let Some(m) = reply {
                    return Ok(Answer {
                        inbox_id: UNRESOLVED,
                        status: String::new(),
                        reply: m.text,
                    });
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(format!("no reply yet to {chat}:{message_id}"));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// What the users of the fake Telegram saw.
#[derive(Debug, Default, Serialize)]
pub struct Receipts {
    pub updates: usize,
    /// `sendMessage` calls the fake accepted.
    pub sends: usize,
    pub answered_exactly_once: usize,
    pub unanswered: usize,
    /// Updates the user saw answered twice or more (each extra copy is a resend below).
    pub answered_more_than_once: usize,
    /// Extra copies whose first copy went out before a kill and which came after it: the
    /// documented window between Telegram's acceptance and our `mark_sent`.
    pub resends_across_a_kill: usize,
    /// Extra copies no kill explains: a broken promise.
    pub resends_without_a_kill: usize,
    /// Sends that quote no pushed update (later chunks, stray messages).
    pub sends_not_replies: usize,
    pub details: Vec<String>,
}

impl Receipts {
    /// Every update answered, and any resend explained by a kill.
    pub fn promise_held(&self) -> bool {
        self.unanswered == 0
            && self.resends_without_a_kill == 0
            && self.answered_exactly_once + self.answered_more_than_once == self.updates
    }
}
