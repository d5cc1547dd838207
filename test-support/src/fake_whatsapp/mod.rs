//! A fake WhatsApp Cloud API on 127.0.0.1 for end-to-end tests: the Graph API under
//! `<base>/v21.0/`, the media download host, and webhooks POSTed to the daemon signed as Meta
//! signs them. Proven with plain reqwest in `tests/it/fake_whatsapp_selftest.rs`.
//!
//! It exists so the WhatsApp adapter runs its real HTTP code with no network. It must not be
//! kinder than Meta where the adapter's correctness depends on it: refusals are Graph's error
//! JSON with the real codes and HTTP statuses, a free-form message outside the person's
//! 24-hour window is refused (131047), a template must be approved, a webhook not answered
//! 200 is posted again (same bytes) until it is, media downloads need the bearer token, and
//! WhatsApp has no edits. It records what the bot did so tests assert on what a person sees.
//!
//! Deliberate differences from Meta, to keep tests fast and deterministic:
//! - A webhook is retried every 300 ms (settable), not with Meta's growing pause over 7 days.
//! - Every accepted message gets its `sent` and `delivered` statuses at once (switchable);
//!   `read` and `failed` come only when a test asks.
//! - A send outside the 24-hour window is refused synchronously with 131047 (the Cloud API may
//!   also accept it and report 131047 in a `failed` status: [`FakeWhatsApp::fail_delivery`]).

mod graph;
mod inject;
mod messages;
mod state;
mod webhooks;

pub use state::{Fault, Hook, Media, Read, Sent};
pub use webhooks::signature;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Who the fake business is. Every field has a default.
#[derive(Clone, Debug)]
pub struct FakeWhatsAppConfig {
    pub access_token: String,
    pub phone_number_id: String,
    pub display_phone_number: String,
    pub verified_name: String,
    pub waba_id: String,
    pub app_secret: String,
    pub verify_token: String,
}

impl Default for FakeWhatsAppConfig {
    fn default() -> Self {
        FakeWhatsAppConfig {
            access_token: "EAAGfakeSystemUserToken0001".into(),
            phone_number_id: "106540352242922".into(),
            display_phone_number: "+1 555-000-1111".into(),
            verified_name: "Herald Test".into(),
            waba_id: "102290129340398".into(),
            app_secret: "fake-app-secret-7c1e".into(),
            verify_token: "fake-verify-token-42".into(),
        }
    }
}

pub(crate) struct Shared {
    pub cfg: FakeWhatsAppConfig,
    /// `http://127.0.0.1:P`, no trailing slash.
    pub base: String,
    pub http: reqwest::Client,
    state: Mutex<state::State>,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, state::State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake; its server stops when it is dropped.
pub struct FakeWhatsApp {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for FakeWhatsApp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeWhatsApp {
    pub async fn start(cfg: FakeWhatsAppConfig) -> FakeWhatsApp {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let shared = Arc::new(Shared {
            cfg,
            base,
            http: reqwest::Client::new(),
            state: Mutex::new(state::State::new()),
        });
        let app = graph::router(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeWhatsApp { shared, task }
    }

    pub fn config(&self) -> &FakeWhatsAppConfig {
        &self.shared.cfg
    }

    /// `http://127.0.0.1:P`: the media host lives here too.
    pub fn base_url(&self) -> String {
        self.shared.base.clone()
    }

    /// `<base>/v21.0`: what the adapter's `api_url` is set to.
    pub fn api_url(&self) -> String {
        format!("{}/v21.0", self.shared.base)
    }

    /// Where webhooks go (the daemon's `webhook_path` on its listener). Webhooks made before
    /// wait for it.
    pub fn set_webhook(&self, url: &str) {
        self.shared.lock().target = Some(url.to_string());
    }

    /// Meta's verification request: `GET <url>?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`.
    /// Returns the status and body.
    pub async fn verify(&self, url: &str, token: &str, challenge: &str) -> (u16, String) {
        let query = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("hub.mode", "subscribe")
            .append_pair("hub.verify_token", token)
            .append_pair("hub.challenge", challenge)
            .finish();
        let res = self
            .shared
            .http
            .get(format!("{url}?{query}"))
            .send()
            .await
            .expect("the daemon answers");
        let status = res.status().as_u16();
        (status, res.text().await.unwrap_or_default())
    }

    // ---- people ------------------------------------------------------------------------------

    pub fn set_name(&self, wa_id: &str, name: &str) {
        self.shared
            .lock()
            .names
            .insert(wa_id.to_string(), name.to_string());
    }

    /// Moves the person's last message `secs` into the past (0 with `None`: never wrote).
    pub fn set_last_inbound(&self, wa_id: &str, secs_ago: Option<i64>) {
        let mut st = self.shared.lock();
        match secs_ago {
            Some(s) => {
                let at = chrono::Utc::now().timestamp() - s;
                st.last_inbound.insert(wa_id.to_string(), at);
            }
            None => {
                st.last_inbound.remove(wa_id);
            }
        }
    }

    /// Approves a message template in a language.
    pub fn approve_template(&self, name: &str, language: &str) {
        self.shared
            .lock()
            .templates
            .insert((name.to_string(), language.to_string()));
    }

    // ---- faults ------------------------------------------------------------------------------

    /// The next message send meets `fault` (queued after earlier ones).
    pub fn fail_next_send(&self, fault: Fault) {
        self.shared.lock().faults.push_back(fault);
    }

    /// The next send answers HTTP 429, code 130429, `Retry-After: secs`.
    pub fn rate_limit_next(&self, secs: u64) {
        self.fail_next_send(Fault::RateLimited {
            retry_after_secs: Some(secs),
        });
    }

    /// Reports message `wamid` as failed with `code` (a `failed` status webhook).
    pub fn fail_delivery(&self, wamid: &str, code: i64, title: &str) {
        let sent = self.sent().into_iter().find(|s| s.wamid == wamid);
        let (to, callback) = sent.map_or((String::new(), None), |s| (s.to, s.callback));
        webhooks::status(
            &self.shared,
            wamid,
            &to,
            "failed",
            callback.as_deref(),
            Some((code, title)),
        );
    }

    /// Reports message `wamid` as read by the person.
    pub fn read_by_person(&self, wamid: &str) {
        let sent = self.sent().into_iter().find(|s| s.wamid == wamid);
        let (to, callback) = sent.map_or((String::new(), None), |s| (s.to, s.callback));
        webhooks::status(&self.shared, wamid, &to, "read", callback.as_deref(), None);
    }

    pub fn set_auto_status(&self, on: bool) {
        self.shared.lock().auto_status = on;
    }

    pub fn set_retry(&self, delay: Duration, max_retries: Option<u32>) {
        let mut st = self.shared.lock();
        st.retry_delay = delay;
        st.max_retries = max_retries;
    }

    /// Posts the webhook `id` made again, as Meta may (a redelivery of something answered).
    pub fn redeliver(&self, id: u64) {
        let body = self
            .hooks()
            .into_iter()
            .find(|h| h.id == id)
            .map(|h| h.body);
        if let Some(body) = body.and_then(|b| serde_json::from_str(&b).ok()) {
            webhooks::deliver(&self.shared, body, vec![]);
        }
    }

    /// Posts an arbitrary change `value` as a signed webhook (malformed-input tests).
    pub fn post_value(&self, value: serde_json::Value) -> u64 {
        let body = webhooks::envelope(&self.shared, value);
        webhooks::deliver(&self.shared, body, vec![])
    }

    // ---- records -----------------------------------------------------------------------------

    /// Every message the bot sent, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// The messages the bot sent to `wa_id`, in order.
    pub fn sent_to(&self, wa_id: &str) -> Vec<Sent> {
        self.sent().into_iter().filter(|s| s.to == wa_id).collect()
    }

    /// A file on the fake's servers.
    pub fn media(&self, id: &str) -> Option<Media> {
        self.shared.lock().media.get(id).cloned()
    }

    pub fn reads(&self) -> Vec<Read> {
        self.shared.lock().reads.clone()
    }

    pub fn hooks(&self) -> Vec<Hook> {
        self.shared.lock().hooks.clone()
    }

    /// Message sends that arrived, refused or not.
    pub fn send_calls(&self) -> usize {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|(c, _)| c == "messages")
            .count()
    }
}
