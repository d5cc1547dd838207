//! Events API mode: instead of the socket, events are POSTed as JSON to the app's URL, clicks
//! as a form `payload=<json>` to its interactivity URL and slash commands as a form to their
//! request URL; every post signed as Slack signs (`X-Slack-Request-Timestamp`,
//! `X-Slack-Signature: v0=hex(HMAC-SHA256(secret, "v0:{ts}:{body}"))`). An event whose post is
//! not answered 2xx within `ack_timeout` is posted again with `X-Slack-Retry-Num` (1..=3) and
//! `X-Slack-Retry-Reason` (`http_error`, `http_timeout`, `connection_failed`), unless the app
//! answered `X-Slack-No-Retry: 1`. Helpers post the `url_verification` challenge and the
//! unsigned, stale and badly signed requests the 401 tests need.
//!
//! Must not: retry clicks or commands (Slack does not), or sign anything but the exact bytes
//! it sends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{CONTENT_TYPE, USER_AGENT};
use serde_json::{json, Value};

use super::envelopes::EnvKind;
use super::records::{Delivery, Route};
use super::{payloads, sign, FakeSlack, Shared};

const FORM: &str = "application/x-www-form-urlencoded";

/// Where the app listens in Events API mode; all `None`: Socket Mode.
pub(crate) struct Targets {
    pub events: Option<String>,
    pub interactive: Option<String>,
    pub commands: Option<String>,
    /// Waits before retry 1, 2, 3 (the last repeats).
    pub retry_delays: Vec<Duration>,
}

impl Default for Targets {
    fn default() -> Self {
        Targets {
            events: None,
            interactive: None,
            commands: None,
            retry_delays: vec![
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(2),
            ],
        }
    }
}

impl Targets {
    /// The URL a payload of `kind` goes to, or `None` in Socket Mode.
    pub fn url_for(&self, kind: EnvKind) -> Option<String> {
        self.events.as_ref()?;
        let url = match kind {
            EnvKind::EventsApi => self.events.clone(),
            EnvKind::Interactive => self.interactive.clone(),
            EnvKind::SlashCommands => self.commands.clone(),
        };
        let which = kind.name();
        Some(url.unwrap_or_else(|| panic!("fake slack: Events API mode has no URL for {which}")))
    }
}

/// How a hand-made post is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signing {
    /// As Slack signs, timestamp now.
    Valid,
    /// Neither header.
    Unsigned,
    /// A correct signature over a timestamp this many seconds old.
    Stale { age_secs: i64 },
    /// Signed with another secret.
    WrongSecret,
    /// A correct signature, but the timestamp header left out.
    MissingTimestamp,
}

/// The app's answer to a post.
#[derive(Clone, Debug)]
pub struct HttpReply {
    pub status: u16,
    pub body: String,
    pub headers: Vec<(String, String)>,
}

fn form_of(fields: &Value) -> String {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in fields.as_object().into_iter().flatten() {
        match v {
            Value::String(s) => form.append_pair(k, s),
            other => form.append_pair(k, &other.to_string()),
        };
    }
    form.finish()
}

/// The body and content type Slack sends a payload of `kind` as.
fn encode(kind: EnvKind, payload: &Value) -> (String, &'static str) {
    match kind {
        EnvKind::EventsApi => (payload.to_string(), "application/json"),
        EnvKind::Interactive => (form_of(&json!({"payload": payload.to_string()})), FORM),
        EnvKind::SlashCommands => (form_of(payload), FORM),
    }
}

/// One signed POST; `retry` = (number, reason) for the retry headers.
async fn post_once(
    shared: &Shared,
    url: &str,
    body: &str,
    ctype: &str,
    signing: Signing,
    retry: Option<(u32, &str)>,
    timeout: Duration,
) -> Result<HttpReply, reqwest::Error> {
    let now = chrono::Utc::now().timestamp();
    let ts = match signing {
        Signing::Stale { age_secs } => now - age_secs,
        _ => now,
    };
    let secret = match signing {
        Signing::WrongSecret => "not-the-signing-secret",
        _ => shared.cfg.signing_secret.as_str(),
    };
    let mut req = shared
        .http
        .post(url)
        .header(CONTENT_TYPE, ctype)
        .header(USER_AGENT, "Slackbot 1.0 (+https://api.slack.com/robots)")
        .timeout(timeout)
        .body(body.to_string());
    if signing != Signing::Unsigned {
        req = req.header(
            "X-Slack-Signature",
            sign::signature(secret, ts, body.as_bytes()),
        );
    }
    if !matches!(signing, Signing::Unsigned | Signing::MissingTimestamp) {
        req = req.header("X-Slack-Request-Timestamp", ts.to_string());
    }
    if let Some((n, reason)) = retry {
        req = req
            .header("X-Slack-Retry-Num", n.to_string())
            .header("X-Slack-Retry-Reason", reason);
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
        .collect();
    let body = resp.text().await?;
    Ok(HttpReply {
        status,
        body,
        headers,
    })
}

/// Posts a payload in the background until the app takes it (or retries run out).
pub(crate) fn post(
    shared: Arc<Shared>,
    kind: EnvKind,
    payload: Value,
    id: String,
    event_id: Option<String>,
    url: String,
) {
    tokio::spawn(async move {
        let (body, ctype) = encode(kind, &payload);
        let (max, delays, timeout) = {
            let st = shared.lock();
            let t = &st.targets;
            (st.max_retries, t.retry_delays.clone(), st.ack_timeout)
        };
        let mut attempt = 0u32;
        let mut reason = String::new();
        loop {
            let at = Instant::now();
            let retry = (attempt > 0).then_some((attempt, reason.as_str()));
            let outcome =
                post_once(&shared, &url, &body, ctype, Signing::Valid, retry, timeout).await;
            let (status, failure, no_retry, answer) = match outcome {
                Ok(r) => {
                    let no_retry = r
                        .headers
                        .iter()
                        .any(|(k, v)| k.eq_ignore_ascii_case("x-slack-no-retry") && v == "1");
                    let ok = (200..300).contains(&r.status);
                    (
                        Some(r.status),
                        (!ok).then_some("http_error"),
                        no_retry,
                        r.body,
                    )
                }
                Err(e) if e.is_timeout() => (None, Some("http_timeout"), false, String::new()),
                Err(_) => (None, Some("connection_failed"), false, String::new()),
            };
            shared.lock().rec.deliveries.push(Delivery {
                envelope_id: id.clone(),
                event_id: event_id.clone(),
                kind: kind.name().to_string(),
                retry_attempt: attempt,
                route: Route::Http {
                    url: url.clone(),
                    status,
                    failure: failure.map(str::to_string),
                    body: answer,
                },
                at,
            });
            let Some(failure) = failure else { return };
            let out_of_retries = max.is_some_and(|m| attempt >= m);
            if no_retry || kind != EnvKind::EventsApi || out_of_retries {
                return;
            }
            let wait = delays
                .get(attempt as usize)
                .or(delays.last())
                .copied()
                .unwrap_or(Duration::from_secs(1));
            tokio::time::sleep(wait).await;
            attempt += 1;
            reason = failure.to_string();
        }
    });
}

impl FakeSlack {
    /// Events API mode: events are POSTed to `url` instead of the socket.
    pub fn events_target(&self, url: &str) {
        self.shared.lock().targets.events = Some(url.to_string());
    }

    /// Where clicks are POSTed in Events API mode (required before a click there).
    pub fn interactive_target(&self, url: &str) {
        self.shared.lock().targets.interactive = Some(url.to_string());
    }

    /// Where slash commands are POSTed in Events API mode (required before one there).
    pub fn commands_target(&self, url: &str) {
        self.shared.lock().targets.commands = Some(url.to_string());
    }

    /// Back to Socket Mode for what is sent from now on.
    pub fn socket_mode(&self) {
        let mut st = self.shared.lock();
        let delays = std::mem::take(&mut st.targets.retry_delays);
        st.targets = super::events_api::Targets {
            retry_delays: delays,
            ..Default::default()
        };
    }

    /// Waits before Events API retries 1, 2, 3 (the last one repeats).
    pub fn set_http_retry_delays(&self, delays: &[Duration]) {
        self.shared.lock().targets.retry_delays = delays.to_vec();
    }

    fn events_url(&self) -> String {
        let st = self.shared.lock();
        let url = st.targets.events.clone();
        url.expect("fake slack: set events_target first")
    }

    /// The challenge Slack sends when an Events API URL is saved; the app must echo it.
    pub async fn url_verification(&self, challenge: &str) -> HttpReply {
        let body = json!({
            "token": self.shared.cfg.verification_token,
            "challenge": challenge,
            "type": "url_verification",
        });
        self.post_raw(
            &self.events_url(),
            &body.to_string(),
            "application/json",
            Signing::Valid,
        )
        .await
    }

    /// One post of `event` (wrapped in an `event_callback` with a fresh event id) to the
    /// events URL, signed as asked, never retried and never stored in a channel: what a
    /// forger, a replayer or a misconfigured proxy would send.
    pub async fn post_event_signed(&self, event: Value, signing: Signing) -> HttpReply {
        let event_id = self.shared.lock().new_id("Ev");
        let time = chrono::Utc::now().timestamp();
        let body = payloads::event_callback(&self.shared.cfg, event, &event_id, time);
        let url = self.events_url();
        self.post_raw(&url, &body.to_string(), "application/json", signing)
            .await
    }

    /// Any body to any URL, signed as asked; no retry, no record.
    pub async fn post_raw(
        &self,
        url: &str,
        body: &str,
        ctype: &str,
        signing: Signing,
    ) -> HttpReply {
        let timeout = Duration::from_secs(30);
        match post_once(&self.shared, url, body, ctype, signing, None, timeout).await {
            Ok(r) => r,
            Err(e) => panic!("fake slack: post to {url} failed: {e}"),
        }
    }
}
