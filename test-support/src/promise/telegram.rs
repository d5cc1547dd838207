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

use tokio_util::sync::CancellationToken;

use super::super::fake_telegram::{message_json, FakeTelegram};
use super::census::Kill;
use super::load::{Answer, Channel, UNRESOLVED};
pub use super::receipts::Receipts;

pub const TOKEN: &str = "4242:promise-token";
/// Private chats (and their users) start here; lane `i` is chat `FIRST_CHAT + i`.
const FIRST_CHAT: i64 = 7000;
/// How long one delivery attempt waits for the reply before the client looks again.
const ATTEMPT_WAIT: Duration = Duration::from_secs(2);

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
        let pushed: Vec<(i64, i64)> = self
            .pushed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .copied()
            .collect();
        let sends: Vec<(Option<(i64, i64)>, i64)> = sent
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let stamp = stamps.get(i).copied().unwrap_or(i64::MAX);
                (m.reply_to.map(|to| (m.chat_id, to)), stamp)
            })
            .collect();
        Receipts::count(&pushed, &sends, kills)
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
