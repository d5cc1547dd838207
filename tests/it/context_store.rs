//! The `ContextStore` methods on both backends (Postgres when `DATABASE_URL` is set): state
//! on the session row, compaction with its state in one transaction, imports.

use std::sync::Arc;
use std::time::Duration;

use herald::domain::Role;
use herald::domain::SessionId;
use herald::store::{self, ContextRow, ImportedMessage, NewMessage, Session, Store, StoreError};

fn session(id: &str, lane: &str) -> Session {
    Session::new(id, lane.into(), 1, "sys", "m")
}

async fn contract(store: Arc<dyn Store>) {
    store.migrate().await.unwrap();
    let tag = uuid::Uuid::new_v4().simple().to_string();
    let lane = format!("web:ctx-{tag}");
    let sid = format!("s-{tag}");
    let lease = store
        .lease_acquire(&lane, "me", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    store
        .session_create(&lease, &session(&sid, &lane))
        .await
        .unwrap();
    assert_eq!(
        store.context_get(&SessionId::from(&sid)).await.unwrap(),
        Some(ContextRow::default())
    );
    assert_eq!(
        store.context_get(&"no-such-session".into()).await.unwrap(),
        None
    );

    let ids = store
        .append_messages(
            &lease,
            &SessionId::from(&sid),
            &[
                NewMessage::new(Role::User, "a"),
                NewMessage::new(Role::Assistant, "b"),
            ],
        )
        .await
        .unwrap();
    let row = ContextRow {
        compaction_strikes: 2,
        breaker_blocked_ms: Some(77),
        breaker_clock: Some("proc-1".into()),
        breaker_clock_ms: Some(123_456),
        prompt_tokens_anchor: Some(1234),
        anchor_fingerprint: Some("pending".into()),
        ..ContextRow::default()
    };
    let new = store
        .compact_with_state(
            &lease,
            &SessionId::from(&sid),
            &ids[..1],
            &[NewMessage::new(Role::User, "carrier")],
            &row,
        )
        .await
        .unwrap();
    assert_eq!(
        store.context_get(&SessionId::from(&sid)).await.unwrap(),
        Some(row.clone())
    );
    let old = store.message_get(ids[0]).await.unwrap().unwrap();
    assert!(old.compacted && !old.active);
    assert_eq!(
        store.message_get(new[0]).await.unwrap().unwrap().content,
        "carrier"
    );

    // A stale view aborts the whole compaction, state included.
    let stale = ContextRow::default();
    let err = store
        .compact_with_state(&lease, &SessionId::from(&sid), &ids[..1], &[], &stale)
        .await;
    assert!(matches!(err, Err(StoreError::NotFound(_))), "{err:?}");
    assert_eq!(
        store.context_get(&SessionId::from(&sid)).await.unwrap(),
        Some(row)
    );

    // A lost lease writes nothing.
    store.lease_release(&lease).await.unwrap();
    let thief = store
        .lease_acquire(&lane, "other", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let err = store
        .context_set(&lease, &SessionId::from(&sid), &ContextRow::default())
        .await;
    assert!(matches!(err, Err(StoreError::LeaseLost { .. })), "{err:?}");

    // Import: a closed session with its flags, beside the lane's open one.
    let msgs =
        [(true, false), (false, true), (false, false)].map(|(active, compacted)| ImportedMessage {
            message: NewMessage::new(Role::User, format!("imported {active} {compacted}")),
            active,
            compacted,
        });
    let isid = format!("i-{tag}");
    let ids = store
        .session_import(&thief, &session(&isid, &lane), "imported", &msgs)
        .await
        .unwrap();
    let got = store
        .messages(&SessionId::from(&isid), false)
        .await
        .unwrap();
    assert_eq!(got.iter().map(|m| m.id).collect::<Vec<_>>(), ids);
    assert_eq!(
        got.iter()
            .map(|m| (m.active, m.compacted))
            .collect::<Vec<_>>(),
        [(true, false), (false, true), (false, false)]
    );
    assert!(store
        .session_get(&SessionId::from(&isid))
        .await
        .unwrap()
        .unwrap()
        .ended_at
        .is_some());
    store.close().await;
}

#[tokio::test]
async fn context_store_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/c.db", dir.path().display());
    contract(store::connect(&url, 2).await.unwrap()).await;
}

#[tokio::test]
async fn context_store_on_postgres() {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        herald_test_support::skip_or_fail("DATABASE_URL not set: no Postgres run");
        return;
    };
    contract(store::connect(&url, 4).await.unwrap()).await;
}
