//! The WhatsApp way in for the promise runs: lane `i` is the chat of the person
//! `4915000000i…` with the business number on the fake Cloud API, each message one signed
//! webhook (posted again until the daemon answers 200, as Meta does: a kill loses none), and
//! the answer whatever the fake recorded from `POST /{phone-number-id}/messages` to that
//! person quoting the message (`context.message_id`): the user-visible truth, independent of
//! the store the census reads.
//!
//! WhatsApp has no idempotency key and no way to look a sent message up, so a kill between
//! Meta's acceptance and `mark_sent` may send a chunk again; the adapter closes that window
//! with the `sent` status callback (it carries the outbox key and is redelivered after the
//! restart). [`Receipts`] counts every extra copy and places it against the kills; none may
//! come without one.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use super::super::fake_whatsapp::{FakeWhatsApp, FakeWhatsAppConfig};
use super::attempt::{await_reply, daemon_env, Pushed};
use super::census::Kill;
use super::crash::Side;
use super::load::{Answer, Channel};
use super::receipts::Receipts;

/// The person of lane `index` (a German mobile number's digits, as WhatsApp ids are).
pub fn lane_person(index: usize) -> String {
    format!("4915{:09}", index)
}

#[derive(Clone)]
pub struct WhatsAppChannel {
    fake: Arc<FakeWhatsApp>,
    /// client id → (person, wamid) of the message injected for it.
    pushed: Pushed<(String, String)>,
}

impl WhatsAppChannel {
    /// Starts the fake. `WHATSAPP_FAKE_STATUSES=off` in the environment stops its status
    /// callbacks, to measure the crash window without them.
    pub async fn start() -> WhatsAppChannel {
        let fake = FakeWhatsApp::start(FakeWhatsAppConfig::default()).await;
        if std::env::var("WHATSAPP_FAKE_STATUSES").is_ok_and(|v| v == "off") {
            fake.set_auto_status(false);
        }
        WhatsAppChannel {
            fake: Arc::new(fake),
            pushed: Pushed::default(),
        }
    }

    pub fn fake(&self) -> &FakeWhatsApp {
        &self.fake
    }

    /// Settings for a daemon on this fake, answering everyone.
    pub fn daemon_env(&self) -> Vec<(String, String)> {
        let cfg = self.fake.config();
        daemon_env(vec![
            ("HERALD_WHATSAPP__ACCESS_TOKEN", cfg.access_token.clone()),
            (
                "HERALD_WHATSAPP__PHONE_NUMBER_ID",
                cfg.phone_number_id.clone(),
            ),
            ("HERALD_WHATSAPP__APP_SECRET", cfg.app_secret.clone()),
            ("HERALD_WHATSAPP__VERIFY_TOKEN", cfg.verify_token.clone()),
            ("HERALD_WHATSAPP__API_URL", self.fake.api_url()),
            ("HERALD_WHATSAPP__ALLOW_ALL_USERS", "true".into()),
        ])
    }

    fn push_once(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> Result<(String, String), String> {
        let person = lane
            .strip_prefix("whatsapp:")
            .filter(|p| p.starts_with("4915"))
            .ok_or_else(|| format!("not a lane of this channel: {lane}"))?
            .to_string();
        let mut pushed = self.pushed.lock();
        if let Some(ids) = pushed.get(client_id) {
            return Ok(ids.clone());
        }
        let wamid = self.fake.text(&person, text);
        pushed.insert(client_id.to_string(), (person.clone(), wamid.clone()));
        Ok((person, wamid))
    }

    /// Counts what the people saw: each pushed message's replies (the sends quoting it), and
    /// every extra copy against the kills.
    pub fn receipts(&self, kills: &[Kill]) -> Receipts {
        let pushed = self.pushed.all();
        let index: HashMap<&str, usize> = pushed
            .iter()
            .enumerate()
            .map(|(i, (_, wamid))| (wamid.as_str(), i))
            .collect();
        let keys: Vec<usize> = (0..pushed.len()).collect();
        let sends: Vec<(Option<usize>, i64)> = self
            .fake
            .sent()
            .iter()
            .map(|s| {
                let to = s.context.as_deref().and_then(|c| index.get(c).copied());
                (to, s.at_ms)
            })
            .collect();
        Receipts::count(&keys, &sends, kills)
    }
}

impl Channel for WhatsAppChannel {
    fn platform(&self) -> &'static str {
        "whatsapp"
    }

    fn lane(&self, _prefix: &str, index: usize) -> String {
        format!("whatsapp:{}", lane_person(index))
    }

    fn platform_id(&self, client_id: &str) -> String {
        self.pushed
            .platform_id(client_id, |(_, wamid): &(String, String)| wamid.clone())
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
            let (person, wamid) = pushed?;
            await_reply(&wamid, || {
                let reply = fake
                    .sent_to(&person)
                    .into_iter()
                    .find(|s| s.context.as_deref() == Some(wamid.as_str()));
                reply.map(|s| s.text)
            })
            .await
        }
    }
}

impl Side for WhatsAppChannel {
    type Receipts = Receipts;

    fn daemon_env(&self) -> Vec<(String, String)> {
        WhatsAppChannel::daemon_env(self)
    }

    fn attach(&mut self, base_url: &str) {
        let base = base_url.trim_end_matches('/');
        self.fake.set_webhook(&format!("{base}/whatsapp/webhook"));
    }

    fn receipts(&self, kills: &[Kill]) -> Option<Receipts> {
        Some(WhatsAppChannel::receipts(self, kills))
    }
}
