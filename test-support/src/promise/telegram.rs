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

use std::future::Future;
use std::sync::Arc;

use super::super::fake_telegram::{message_json, FakeTelegram, SentMessage};
use super::attempt::{await_reply, daemon_env, Pushed};
use super::census::Kill;
use super::load::{Answer, Channel};
pub use super::receipts::Receipts;
use super::stamps::Clock;

pub const TOKEN: &str = "4242:promise-token";
/// Private chats (and their users) start here; lane `i` is chat `FIRST_CHAT + i`.
const FIRST_CHAT: i64 = 7000;

#[derive(Clone)]
pub struct TelegramChannel {
    fake: Arc<FakeTelegram>,
    /// client id → (chat, message id) of the update pushed for it.
    pushed: Pushed<(i64, i64)>,
    /// The start, to place the fake's send instants against kills.
    clock: Clock,
}

impl TelegramChannel {
    /// Starts the fake Bot API server.
    pub async fn start() -> TelegramChannel {
        TelegramChannel {
            fake: Arc::new(FakeTelegram::start(TOKEN).await),
            pushed: Pushed::default(),
            clock: Clock::now(),
        }
    }

    /// Settings for a daemon polling this fake.
    pub fn daemon_env(&self) -> Vec<(String, String)> {
        daemon_env(vec![
            ("HERALD_TELEGRAM__TOKEN", TOKEN.to_string()),
            ("HERALD_TELEGRAM__API_URL", self.fake.url()),
            ("HERALD_TELEGRAM__MODE", "polling".into()),
            ("HERALD_TELEGRAM__ALLOW_ALL_USERS", "true".into()),
            ("HERALD_TELEGRAM__POLL_TIMEOUT_SECS", "5".into()),
        ])
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
        let mut pushed = self.pushed.lock();
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
        let quotes = |m: &SentMessage| m.reply_to.map(|to| (m.chat_id, to));
        let sent = self.fake.sent_with_times();
        self.clock.receipts(&self.pushed.all(), sent, quotes, kills)
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
        let show = |(chat, message): &(i64, i64)| format!("{chat}:{message}");
        self.pushed.platform_id(client_id, show)
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
            await_reply(format!("{chat}:{message_id}"), || {
                let mut sent = fake.sent_messages().into_iter();
                let reply = sent.find(|m| m.chat_id == chat && m.reply_to == Some(message_id));
                reply.map(|m| m.text)
            })
            .await
        }
    }
}
