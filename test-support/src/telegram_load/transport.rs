//! How a load message reaches the daemon: pushed into the fake Bot API server for the daemon's
//! poller to fetch (polling mode), or POSTed to the daemon's webhook the way Telegram does
//! (webhook mode: redelivered with the same `update_id` until a 200, as Telegram would).
//!
//! Must not: invent a second id space per message; the webhook reuses the fake's message JSON
//! so both modes hand the daemon the same update shape.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::fake_telegram::{message_json, message_update_json, FakeTelegram};

pub const WEBHOOK_SECRET: &str = "load-bench-secret";

#[derive(Clone)]
pub enum Transport {
    Polling(Arc<FakeTelegram>),
    Webhook(Arc<Webhook>),
}

pub struct Webhook {
    http: reqwest::Client,
    url: String,
    next_id: AtomicI64,
}

impl Transport {
    pub fn webhook(daemon_base_url: &str) -> Transport {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("reqwest client");
        Transport::Webhook(Arc::new(Webhook {
            http,
            url: format!("{daemon_base_url}/telegram/webhook"),
            next_id: AtomicI64::new(1),
        }))
    }

    pub fn name(&self) -> &'static str {
        match self {
            Transport::Polling(_) => "polling",
            Transport::Webhook(_) => "webhook",
        }
    }

    /// Hands one private-chat text message to the daemon. Polling returns at once; the webhook
    /// returns when the daemon answered 200 (its inbox commit), retrying other answers.
    pub async fn send(&self, chat: i64, text: &str) -> Result<(), String> {
        match self {
            Transport::Polling(tg) => {
                tg.push_private_text(chat, chat, text);
                Ok(())
            }
            Transport::Webhook(hook) => hook.post(chat, text).await,
        }
    }
}

impl Webhook {
    async fn post(&self, chat: i64, text: &str) -> Result<(), String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let update = message_update_json(id, message_json(id, chat, chat, text));
        let mut last = String::new();
        for attempt in 0..20u64 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(50 * attempt.min(10))).await;
            }
            let sent = self
                .http
                .post(&self.url)
                .header("X-Telegram-Bot-Api-Secret-Token", WEBHOOK_SECRET)
                .json(&update)
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => return Ok(()),
                Ok(r) => last = format!("HTTP {}", r.status()),
                Err(e) => last = e.to_string(),
            }
        }
        Err(format!("webhook update {id} not accepted: {last}"))
    }
}
