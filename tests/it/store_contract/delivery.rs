//! The contract for a platform's delivery reports (`outbox_report`): a report naming a row's
//! key marks a row not yet marked sent (the crash window between the platform's acceptance and
//! `mark_sent`), delivery states only move forward, `failed` fails the row with its reason,
//! and a report touches only rows of its own platform.

use std::sync::Arc;
use std::time::Duration;

use herald::domain::Platform;
use herald::store::{DeliveryReport, OutboxStatus, Store};

use super::reply;

const TELEGRAM: Platform = Platform::named("telegram");
const WHATSAPP: Platform = Platform::named("whatsapp");

pub async fn delivery_reports(store: Arc<dyn Store>) {
    store
        .outbox_enqueue(&[
            reply("whatsapp:4915112340001", "wa1", 0, None),
            reply("telegram:42", "tg1", 0, None),
        ])
        .await
        .unwrap();
    let claimed = store
        .outbox_claim("s1", &["whatsapp".to_string()], 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let id = claimed[0].id;
    // The sender died after WhatsApp took it: the `sent` report names the key.
    let r = |k: Option<&str>, m: &str, d: DeliveryReport| {
        let store = store.clone();
        let (k, m) = (k.map(str::to_string), m.to_string());
        async move {
            store
                .outbox_report(WHATSAPP, k.as_deref(), &m, &d)
                .await
                .unwrap()
        }
    };
    assert!(r(Some("wa1"), "wamid.1", DeliveryReport::Sent).await);
    let row = |key: &'static str| {
        let store = store.clone();
        async move {
            store
                .outbox_recent(10)
                .await
                .unwrap()
                .into_iter()
                .find(|o| o.idem_key == key)
                .unwrap()
        }
    };
    let wa = row("wa1").await;
    assert_eq!(wa.status, OutboxStatus::Sent);
    assert_eq!(wa.platform_message_id.as_deref(), Some("wamid.1"));
    assert!(store
        .outbox_claim("s2", &["whatsapp".to_string()], 10, Duration::from_secs(60))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(wa.id, id);
    // Forward only: read, then a late delivered changes nothing.
    assert!(r(None, "wamid.1", DeliveryReport::Read).await);
    assert!(!r(None, "wamid.1", DeliveryReport::Delivered).await);
    // Another platform's key and id are not ours to touch.
    assert!(!r(Some("tg1"), "wamid.2", DeliveryReport::Sent).await);
    assert_eq!(row("tg1").await.status, OutboxStatus::Pending);
    assert!(!store
        .outbox_report(
            TELEGRAM,
            None,
            "wamid.1",
            &DeliveryReport::Failed("x".into())
        )
        .await
        .unwrap());
    // Failed: the row fails with the reason, once.
    let why =
        DeliveryReport::Failed("whatsapp delivery failed: error 131026: undeliverable".into());
    assert!(r(None, "wamid.1", why.clone()).await);
    assert!(!r(None, "wamid.1", why).await);
    let wa = row("wa1").await;
    assert_eq!(wa.status, OutboxStatus::Failed);
    assert!(wa.last_error.unwrap().contains("131026"));
    assert_eq!(store.outbox_failed(10).await.unwrap().len(), 1);
}
