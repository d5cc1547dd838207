//! Pairing contracts: codes are issued once per sender, reminded at most every interval,
//! capped, expire, and approval is single-use and feeds the approved-sender list.

use std::sync::Arc;

use herald::domain::{MessageEvent, Platform};
use herald::store::clock::ManualClock;
use herald::store::{InboxStatus, PairingAsk, PairingOutcome, Store, StoreError, APPROVED_NOTICE};

fn ask<'a>(
    platform: &'a str,
    sender: &'a str,
    code: &'a str,
    ttl_ms: i64,
    remind_every_ms: i64,
    max_pending: i64,
) -> PairingAsk<'a> {
    PairingAsk {
        platform,
        sender_id: sender,
        sender_name: "someone",
        chat_id: sender,
        new_code: code,
        ttl_ms,
        remind_every_ms,
        max_pending,
    }
}

pub async fn pairing_lifecycle(store: Arc<dyn Store>) {
    let s = &*store;
    let hour = 3_600_000;
    let issued = s
        .pairing_request(&ask("telegram", "42", "AAAA2222", hour, hour, 10))
        .await
        .unwrap();
    assert_eq!(issued, PairingOutcome::Issued("AAAA2222".into()));
    // Same sender again: the same code, no reminder inside the interval.
    let again = s
        .pairing_request(&ask("telegram", "42", "BBBB3333", hour, hour, 10))
        .await
        .unwrap();
    assert_eq!(
        again,
        PairingOutcome::Pending {
            code: "AAAA2222".into(),
            remind: false
        }
    );
    // With a zero interval the reminder is due.
    let remind = s
        .pairing_request(&ask("telegram", "42", "CCCC4444", hour, 0, 10))
        .await
        .unwrap();
    assert_eq!(
        remind,
        PairingOutcome::Pending {
            code: "AAAA2222".into(),
            remind: true
        }
    );
    assert!(!s.sender_approved("telegram", "42").await.unwrap());
    // What the sender wrote while waiting was refused by the auth hook; another sender's too.
    let mut refused = Vec::new();
    for (sender, text) in [("42", "what is 2+2?"), ("43", "me too")] {
        let ev = MessageEvent::text(Platform::named("telegram"), sender, sender, text);
        let id = s.inbox_insert(&ev).await.unwrap().id();
        s.inbox_skip(id, "auth: unauthorized", &[]).await.unwrap();
        refused.push(id);
    }
    // The wrong platform does not approve it; the right one does, once.
    assert!(matches!(
        s.pairing_approve("discord", "AAAA2222").await,
        Err(StoreError::NotFound(_))
    ));
    let req = s.pairing_approve("telegram", "AAAA2222").await.unwrap();
    assert_eq!(req.sender_id, "42");
    assert!(s.sender_approved("telegram", "42").await.unwrap());
    // Approval queues the waiting message again (only that sender's) and tells them.
    let row = s.inbox_get(refused[0]).await.unwrap().unwrap();
    assert_eq!(row.status, InboxStatus::Pending);
    let other = s.inbox_get(refused[1]).await.unwrap().unwrap();
    assert_eq!(other.status, InboxStatus::Skipped);
    let notices: Vec<_> = s
        .outbox_recent(10)
        .await
        .unwrap()
        .into_iter()
        .filter(|o| o.chat_id == "42" && o.text.starts_with(APPROVED_NOTICE))
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    let listed = s.senders_approved().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].platform.as_str(), listed[0].sender_id.as_str()),
        ("telegram", "42")
    );
    assert!(matches!(
        s.pairing_approve("telegram", "AAAA2222").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(s.sender_revoke("telegram", "42").await.unwrap());
    assert!(!s.sender_approved("telegram", "42").await.unwrap());
    assert!(!s.sender_revoke("telegram", "42").await.unwrap());
    assert!(s.senders_approved().await.unwrap().is_empty());
}

pub async fn pairing_cap_and_expiry(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    let s = &*store;
    let hour = 3_600_000;
    assert!(matches!(
        s.pairing_request(&ask("telegram", "1", "CODE0001", hour, hour, 2))
            .await
            .unwrap(),
        PairingOutcome::Issued(_)
    ));
    // The cap is per platform: another platform's codes do not count.
    assert!(matches!(
        s.pairing_request(&ask("discord", "2", "CODE0002", hour, hour, 1))
            .await
            .unwrap(),
        PairingOutcome::Issued(_)
    ));
    clock.advance(std::time::Duration::from_millis(5));
    assert!(matches!(
        s.pairing_request(&ask("telegram", "3", "CODE0003", hour, hour, 2))
            .await
            .unwrap(),
        PairingOutcome::Issued(_)
    ));
    clock.advance(std::time::Duration::from_millis(5));
    // Full: the newcomer still gets a code, in place of the platform's oldest.
    assert_eq!(
        s.pairing_request(&ask("telegram", "5", "CODE0005", hour, hour, 2))
            .await
            .unwrap(),
        PairingOutcome::IssuedEvicting {
            code: "CODE0005".into(),
            evicted_sender: "1".into(),
            evicted_code: "CODE0001".into(),
        }
    );
    assert!(
        matches!(
            s.pairing_approve("telegram", "CODE0001").await,
            Err(StoreError::NotFound(_))
        ),
        "an evicted code cannot be approved"
    );
    let mut codes: Vec<_> = s
        .pairing_pending()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.code)
        .collect();
    codes.sort();
    assert_eq!(codes, ["CODE0002", "CODE0003", "CODE0005"]);
    // No codes at all when the cap is 0.
    assert_eq!(
        s.pairing_request(&ask("discord", "9", "CODE0009", hour, hour, 0))
            .await
            .unwrap(),
        PairingOutcome::Full
    );
    // An expired code frees its slot and cannot be approved.
    assert!(matches!(
        s.pairing_request(&ask("discord", "4", "CODE0004", -1, hour, 3))
            .await
            .unwrap(),
        PairingOutcome::Issued(_)
    ));
    assert!(matches!(
        s.pairing_approve("discord", "CODE0004").await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(s.pairing_pending().await.unwrap().len(), 3);
}
