//! Contracts for poison messages: a worker's take counts the attempt durably and under the
//! lease before any work, the turn's start never counts it again, a given-up event is `dead`
//! with its one reply queued once, and an operator's retry sends it back uncounted. The
//! outbox's send attempts are counted before the send, by the claim's holder only.

use std::sync::Arc;
use std::time::Duration;

use herald::store::{InboxAttempt, InboxStatus, Store};

use super::{assert_lease_lost, event, insert, lease, open_lane, reply};

pub async fn take_counts_and_dead_letters(store: Arc<dyn Store>) {
    let lane = "web:poison";
    let poison = insert(&store, &event("poison", "this one crashes every turn")).await;
    let next = insert(&store, &event("poison", "and this one is fine")).await;
    let l = open_lane(&store, lane, "s-poison").await;

    // Each take is one start of processing, counted before anything of the turn exists.
    assert_eq!(store.inbox_take(&l, poison).await.unwrap(), Some(1));
    assert_eq!(store.inbox_take(&l, poison).await.unwrap(), Some(2));
    // The turn's start of the second take stores no further count.
    let begun = InboxAttempt {
        id: poison,
        attempt: 2,
    };
    store
        .turn_begin(&l, &"s-poison".into(), Some(begun))
        .await
        .unwrap();
    assert_eq!(store.inbox_get(poison).await.unwrap().unwrap().attempts, 2);
    assert_eq!(store.inbox_get(next).await.unwrap().unwrap().attempts, 0);

    // A worker that lost the lane counts nothing.
    store.lease_release(&l).await.unwrap();
    let l2 = lease(&store, lane, "worker-b", Duration::from_secs(60)).await;
    assert_lease_lost("inbox_take", store.inbox_take(&l, poison).await);
    assert_eq!(store.inbox_get(poison).await.unwrap().unwrap().attempts, 2);
    assert_eq!(store.inbox_take(&l2, poison).await.unwrap(), Some(3));
    // The next take finds it past a cap of 3.
    assert_eq!(store.inbox_take(&l2, poison).await.unwrap(), Some(4));

    // Given up: dead, with the reason, its three real attempts and the person's one notice; a
    // second give-up (a worker that crashed after the first) changes and queues nothing more.
    let notice = [reply(lane, "web:poison:dead-notice", 0, Some(poison))];
    let reason = "3 starts ended without a result";
    store.inbox_give_up(poison, reason, &notice).await.unwrap();
    store.inbox_give_up(poison, reason, &notice).await.unwrap();
    let row = store.inbox_get(poison).await.unwrap().unwrap();
    assert_eq!(row.status, InboxStatus::Dead);
    assert_eq!(row.note.as_deref(), Some(reason));
    assert_eq!(store.outbox_for_inbox(poison).await.unwrap().len(), 1);
    // The lane moves on, and a dead row is never taken again.
    let pending: Vec<i64> = store
        .inbox_pending(&row.lane, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(pending, [next]);
    assert_eq!(store.inbox_take(&l2, poison).await.unwrap(), None);

    let dead = store.inbox_dead(10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].row.id, poison);
    assert_eq!(dead[0].row.attempts, 3);
    assert_eq!(dead[0].reason(), reason);
    assert_eq!(dead[0].preview(12), "this one cra…");
    assert!(dead[0].dead_at > 0);

    // Retry: only a dead row, back to pending with no attempt and no reason.
    assert!(!store.inbox_retry(next).await.unwrap());
    assert!(store.inbox_retry(poison).await.unwrap());
    assert!(!store.inbox_retry(poison).await.unwrap());
    let row = store.inbox_get(poison).await.unwrap().unwrap();
    assert_eq!(
        (row.status, row.attempts, row.note),
        (InboxStatus::Pending, 0, None)
    );
    assert!(store.inbox_dead(10).await.unwrap().is_empty());
    assert_eq!(store.inbox_take(&l2, poison).await.unwrap(), Some(1));
}

pub async fn outbox_send_attempts_count_before_the_send(store: Arc<dyn Store>) {
    let web = ["web".to_string()];
    store
        .outbox_enqueue(&[reply("web:o", "o-1", 0, None)])
        .await
        .unwrap();
    let claimed = store
        .outbox_claim("s1", &web, 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let id = claimed[0].id;
    assert_eq!(claimed[0].attempts, 0, "a claim alone counts nothing");
    assert_eq!(store.outbox_start(id, "s1").await.unwrap(), Some(1));
    // Only the claim's holder counts (and may send).
    assert_eq!(store.outbox_start(id, "s2").await.unwrap(), None);
    // A retry records the error without counting again.
    store
        .outbox_mark_retry(id, "s1", "timeout", 0, false)
        .await
        .unwrap();
    let again = store
        .outbox_claim("s1", &web, 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(again[0].attempts, 1);
    assert_eq!(store.outbox_start(id, "s1").await.unwrap(), Some(2));
    // Given up: listed among the failed rows, with its error.
    store
        .outbox_mark_retry(
            id,
            "s1",
            "abandoned: 2 sends ended without a result",
            0,
            true,
        )
        .await
        .unwrap();
    let failed = store.outbox_failed(10).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].id, id);
    assert_eq!(failed[0].attempts, 2);
    assert!(failed[0]
        .last_error
        .as_deref()
        .unwrap()
        .starts_with("abandoned"));
    // Sent rows count their one start only.
    store
        .outbox_enqueue(&[reply("web:o2", "o-2", 0, None)])
        .await
        .unwrap();
    let c = store
        .outbox_claim("s3", &web, 10, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(store.outbox_start(c[0].id, "s3").await.unwrap(), Some(1));
    store.outbox_mark_sent(c[0].id, "msg-1").await.unwrap();
    let sent = store.outbox_recent(10).await.unwrap();
    let sent = sent.iter().find(|r| r.id == c[0].id).unwrap();
    assert_eq!((sent.status.as_str(), sent.attempts), ("sent", 1));
}
