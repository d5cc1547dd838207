//! Webhooks to the daemon, as Meta sends them: the `whatsapp_business_account` envelope
//! (`entry[].changes[].value` with `metadata`, `contacts` and `messages`, or `statuses`),
//! POSTed as JSON with `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, body)>`.
//!
//! A POST not answered 200 is made again, the same bytes, until it is (Meta retries for up to
//! seven days with a growing pause; here every `retry_delay`, 300 ms by default, with no
//! limit unless one is set), so a daemon that was down gets everything once it is back. Each
//! webhook is delivered on its own task: like Meta, the fake promises no order between them.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::state::Hook;
use super::Shared;
use crate::fake_slack::sign::hmac_sha256;

/// `sha256=<hex HMAC-SHA256(secret, body)>`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    format!(
        "sha256={}",
        hex::encode(hmac_sha256(secret.as_bytes(), body))
    )
}

/// The envelope around one change `value`.
pub fn envelope(shared: &Shared, mut value: Value) -> Value {
    value["messaging_product"] = json!("whatsapp");
    value["metadata"] = json!({
        "display_phone_number": shared.cfg.display_phone_number.trim_start_matches('+').replace(' ', ""),
        "phone_number_id": shared.cfg.phone_number_id,
    });
    json!({
        "object": "whatsapp_business_account",
        "entry": [{
            "id": shared.cfg.waba_id,
            "changes": [{"field": "messages", "value": value}],
        }],
    })
}

/// A status callback about a message the bot sent.
pub fn status(
    shared: &Arc<Shared>,
    wamid: &str,
    to: &str,
    status: &str,
    callback: Option<&str>,
    error: Option<(i64, &str)>,
) {
    let mut s = json!({
        "id": wamid,
        "status": status,
        "timestamp": chrono::Utc::now().timestamp().to_string(),
        "recipient_id": to,
        "conversation": {"id": "CONVERSATION_ID", "origin": {"type": "service"}},
        "pricing": {"billable": true, "pricing_model": "PMP", "category": "service"},
    });
    if let Some(c) = callback {
        s["biz_opaque_callback_data"] = json!(c);
    }
    if let Some((code, title)) = error {
        s["errors"] = json!([{
            "code": code, "title": title, "message": title,
            "error_data": {"details": title},
        }]);
    }
    let body = envelope(shared, json!({ "statuses": [s] }));
    deliver(shared, body, vec![wamid.to_string()]);
}

/// Queues `body` and starts delivering it; returns the hook's id.
pub fn deliver(shared: &Arc<Shared>, body: Value, about: Vec<String>) -> u64 {
    let text = body.to_string();
    let id = {
        let mut st = shared.lock();
        let id = st.next();
        st.hooks.push(Hook {
            id,
            body: text.clone(),
            deliveries: 0,
            acked: false,
            about,
        });
        id
    };
    let weak = Arc::downgrade(shared);
    tokio::spawn(async move {
        let mut tries = 0u32;
        loop {
            let Some(shared) = weak.upgrade() else { return };
            let (target, delay, limit) = {
                let st = shared.lock();
                (st.target.clone(), st.retry_delay, st.max_retries)
            };
            if let Some(url) = target {
                let ok = post(&shared, &url, &text).await;
                let mut st = shared.lock();
                if let Some(h) = st.hooks.iter_mut().find(|h| h.id == id) {
                    h.deliveries += 1;
                    h.acked |= ok;
                }
                tries += 1;
                if ok || limit.is_some_and(|l| tries > l) {
                    return;
                }
            }
            drop(shared);
            tokio::time::sleep(delay).await;
        }
    });
    id
}

/// One signed POST of `body`; whether it was answered 200.
async fn post(shared: &Shared, url: &str, body: &str) -> bool {
    let sig = signature(&shared.cfg.app_secret, body.as_bytes());
    let res = shared
        .http
        .post(url)
        .header("content-type", "application/json")
        .header("x-hub-signature-256", sig)
        .header("user-agent", "facebookexternalua")
        .body(body.to_string())
        .timeout(Duration::from_secs(20))
        .send()
        .await;
    matches!(res, Ok(r) if r.status().as_u16() == 200)
}
