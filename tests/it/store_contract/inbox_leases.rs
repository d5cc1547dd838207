//! Contracts for migrations, the inbox and leases (including fencing): the guarantees that a
//! redelivered update is a no-op and that a worker which lost its lane cannot write to it.

use std::sync::Arc;
use std::time::Duration;

use herald::domain::{LaneKey, Role};
use herald::store::clock::ManualClock;
use herald::store::{
    InboxAttempt, InboxInsert, InboxStatus, NewMessage, Store, StoreError, TurnCommit,
};

use super::{assert_lease_lost, event, insert, lease, reply, session};

pub async fn migrate_twice_is_a_noop(store: Arc<dyn Store>) {
    assert!(!store.ready().await.unwrap(), "ready before migrate");
    store.migrate().await.unwrap();
    assert!(store.ready().await.unwrap(), "ready after migrate");
    let id = insert(&store, &event("m", "kept across a second migrate")).await;
    store.migrate().await.expect("second migrate");
    assert!(store.ready().await.unwrap());
    let row = store.inbox_get(id).await.unwrap().expect("row survives");
    assert_eq!(row.event.text, "kept across a second migrate");
}

/// `herald migrate` applies pending migrations one at a time to report each; stopping between
/// two steps leaves a store that says exactly what is left.
pub async fn migrations_apply_one_at_a_time(store: Arc<dyn Store>) {
    let all = store.migrations_pending().await.unwrap();
    assert!(all.len() >= 2, "{all:?}");
    assert!(
        all.windows(2).all(|w| w[0].version < w[1].version),
        "{all:?}"
    );
    store.migrate_to(all[0].version).await.unwrap();
    assert_eq!(store.migrations_pending().await.unwrap(), all[1..]);
    assert!(!store.ready().await.unwrap(), "ready with migrations left");
    store.migrate_to(all[all.len() - 1].version).await.unwrap();
    assert!(store.migrations_pending().await.unwrap().is_empty());
    assert!(store.ready().await.unwrap());
    store.migrate().await.expect("nothing left to apply");
}

/// A row's public id is set once: a second candidate (a retried request) reads the first, and
/// the id finds its row; an unknown id finds nothing.
pub async fn inbox_public_id(store: Arc<dyn Store>) {
    let a = insert(&store, &event("pub", "one")).await;
    let b = insert(&store, &event("pub", "two")).await;
    assert_eq!(store.inbox_public_id(a, "Qx7").await.unwrap(), "Qx7");
    assert_eq!(store.inbox_public_id(a, "other").await.unwrap(), "Qx7");
    assert_eq!(store.inbox_public_id(b, "Zk2").await.unwrap(), "Zk2");
    assert_eq!(store.inbox_by_public_id("Qx7").await.unwrap(), Some(a));
    assert_eq!(store.inbox_by_public_id("Zk2").await.unwrap(), Some(b));
    assert_eq!(store.inbox_by_public_id("other").await.unwrap(), None);
    assert_eq!(
        store.inbox_by_public_id(&a.to_string()).await.unwrap(),
        None
    );
}

pub async fn inbox_dedup(store: Arc<dyn Store>) {
    let ev = event("dedup", "hello");
    let first = store.inbox_insert(&ev).await.unwrap();
    let InboxInsert::Inserted(id) = first else {
        panic!("first insert: {first:?}");
    };
    // A redelivery carries the same key but may differ in content: nothing of it is written.
    let mut again = ev.clone();
    again.text = "hello (redelivered)".to_string();
    assert_eq!(
        store.inbox_insert(&again).await.unwrap(),
        InboxInsert::Duplicate(id)
    );
    let lane = ev.lane();
    let pending = store.inbox_pending(&lane, 10).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].event, ev);
    assert_eq!(pending[0].status, InboxStatus::Pending);

    // The key is (platform, platform message id): the same id on another platform is new.
    let mut other = ev.clone();
    other.platform = herald::domain::Platform::named("telegram");
    assert!(matches!(
        store.inbox_insert(&other).await.unwrap(),
        InboxInsert::Inserted(other_id) if other_id != id
    ));
}

pub async fn inbox_pending_and_skip(store: Arc<dyn Store>) {
    let a1 = insert(&store, &event("a", "a1")).await;
    let b1 = insert(&store, &event("b", "b1")).await;
    let a2 = insert(&store, &event("a", "a2")).await;
    let a3 = insert(&store, &event("a", "a3")).await;
    let (lane_a, lane_b) = (LaneKey::new("web:a"), LaneKey::new("web:b"));

    let ids = |rows: Vec<herald::store::InboxRow>| rows.iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.inbox_pending(&lane_a, 10).await.unwrap()),
        [a1, a2, a3]
    );
    assert_eq!(
        ids(store.inbox_pending(&lane_a, 2).await.unwrap()),
        [a1, a2]
    );
    assert_eq!(ids(store.inbox_pending(&lane_b, 10).await.unwrap()), [b1]);
    assert_eq!(
        store.inbox_pending_lanes(10).await.unwrap(),
        [lane_a.clone(), lane_b.clone()]
    );

    let replies = [reply("web:a", "skip-a1", 0, Some(a1))];
    store
        .inbox_skip(a1, "unauthorized sender", &replies)
        .await
        .unwrap();
    let row = store.inbox_get(a1).await.unwrap().unwrap();
    assert_eq!(row.status, InboxStatus::Skipped);
    assert_eq!(row.note.as_deref(), Some("unauthorized sender"));
    assert_eq!(
        ids(store.inbox_pending(&lane_a, 10).await.unwrap()),
        [a2, a3]
    );
    let out = store.outbox_for_inbox(a1).await.unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].idem_key, "skip-a1");
    assert_eq!(out[0].status, "pending");

    store.inbox_skip(b1, "media only", &[]).await.unwrap();
    assert_eq!(store.inbox_pending_lanes(10).await.unwrap(), [lane_a]);
    assert!(store.outbox_for_inbox(b1).await.unwrap().is_empty());

    assert_eq!(store.inbox_bump_attempts(a2).await.unwrap(), 1);
    assert_eq!(store.inbox_bump_attempts(a2).await.unwrap(), 2);
    assert_eq!(store.inbox_get(a2).await.unwrap().unwrap().attempts, 2);
    assert_eq!(store.inbox_get(a3).await.unwrap().unwrap().attempts, 0);
    assert!(store.inbox_get(999_999).await.unwrap().is_none());
}

pub async fn lease_lifecycle(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    let short = Duration::from_millis(150);
    let a = lease(&store, "web:l", "a", short).await;
    assert_eq!(a.token, 1);
    assert!(store
        .lease_acquire("web:l", "b", short)
        .await
        .unwrap()
        .is_none());
    let info = store.lease_get("web:l").await.unwrap().unwrap();
    assert_eq!((info.holder.as_str(), info.token), ("a", 1));

    clock.advance(Duration::from_millis(300));
    let b = lease(&store, "web:l", "b", Duration::from_secs(60)).await;
    assert!(
        b.token > a.token,
        "takeover token {} after {}",
        b.token,
        a.token
    );
    assert_lease_lost("lease_renew", store.lease_renew(&a, short).await);
    // A stale release must not free the new holder's lease.
    store.lease_release(&a).await.unwrap();
    assert!(store
        .lease_acquire("web:l", "c", short)
        .await
        .unwrap()
        .is_none());
    store
        .lease_renew(&b, Duration::from_secs(60))
        .await
        .unwrap();

    store.lease_release(&b).await.unwrap();
    let c = lease(&store, "web:l", "c", Duration::from_secs(60)).await;
    assert!(c.token > b.token);

    // Re-acquiring by the same holder bumps the token: the old proof is fenced off.
    let c2 = lease(&store, "web:l", "c", Duration::from_secs(60)).await;
    assert!(c2.token > c.token);
    assert_lease_lost("lease_renew", store.lease_renew(&c, short).await);
    store.lease_renew(&c2, short).await.unwrap();
    assert!(store.lease_get("web:none").await.unwrap().is_none());
}

/// Live leases by name prefix: expired and released ones are left out, and the prefix is matched
/// literally (`_` and `%` are not wildcards).
pub async fn leases_live_by_prefix(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    let long = Duration::from_secs(60);
    lease(&store, "replica:a", "a", long).await;
    let b = lease(&store, "replica:b", "b", long).await;
    lease(&store, "replica:c", "c", Duration::from_millis(100)).await;
    lease(&store, "replicaXd", "d", long).await;
    lease(&store, "role:discord-shard-0", "a/discord", long).await;
    lease(&store, "role:discord_shard-1", "x", long).await;
    store.lease_release(&b).await.unwrap();
    clock.advance(Duration::from_millis(250));

    let names = |v: Vec<herald::store::LeaseInfo>| {
        v.into_iter()
            .map(|l| (l.name, l.holder))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(store.leases_live("replica:").await.unwrap()),
        vec![("replica:a".to_string(), "a".to_string())]
    );
    assert_eq!(
        names(store.leases_live("role:discord-shard-").await.unwrap()),
        vec![("role:discord-shard-0".to_string(), "a/discord".to_string())]
    );
    assert!(store.leases_live("nothing:").await.unwrap().is_empty());
}

/// After a takeover every transcript write by the old holder is refused and lands nothing.
pub async fn lease_fencing(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    let lane = "web:f";
    let short = Duration::from_millis(150);
    let old = lease(&store, lane, "old", short).await;
    store
        .session_create(&old, &session("s-f", lane))
        .await
        .unwrap();
    let inbox_id = insert(&store, &event("f", "question")).await;
    let turn = store
        .turn_begin(&old, &"s-f".into(), Some(InboxAttempt::first(inbox_id)))
        .await
        .unwrap();
    store
        .append_messages(
            &old,
            &"s-f".into(),
            &[NewMessage::new(Role::User, "question")],
        )
        .await
        .unwrap();

    clock.advance(Duration::from_millis(300));
    let new = lease(&store, lane, "new", Duration::from_secs(60)).await;

    let m = [NewMessage::new(Role::Assistant, "late answer")];
    assert_lease_lost(
        "append_messages",
        store.append_messages(&old, &"s-f".into(), &m).await,
    );
    assert_lease_lost(
        "turn_begin",
        store.turn_begin(&old, &"s-f".into(), None).await,
    );
    let commit = TurnCommit {
        turn_id: turn,
        session_id: "s-f".into(),
        messages: m.to_vec(),
        outbox: vec![reply(lane, "fenced-0", 0, Some(inbox_id))],
        inbox_id: Some(inbox_id),
        steered: Vec::new(),
        inbox_status: InboxStatus::Done,
        note: None,
        close_session: None,
        enqueue: Vec::new(),
        billed: Default::default(),
        cost: None,
    };
    assert_lease_lost("turn_commit", store.turn_commit(&old, &commit).await);
    assert_lease_lost(
        "session_close",
        store.session_close(&old, &"s-f".into(), "stale").await,
    );
    assert_lease_lost(
        "session_create",
        store.session_create(&old, &session("s-f2", lane)).await,
    );
    assert_lease_lost("compact", store.compact(&old, &"s-f".into(), &[], &m).await);

    let lane_key = LaneKey::new(lane);
    assert_eq!(store.messages(&"s-f".into(), false).await.unwrap().len(), 1);
    assert_eq!(store.turns(&lane_key, 10).await.unwrap().len(), 1);
    assert!(store.outbox_for_inbox(inbox_id).await.unwrap().is_empty());
    assert_eq!(store.outbox_counts().await.unwrap().pending, 0);
    let ev = store.inbox_get(inbox_id).await.unwrap().unwrap();
    assert_eq!(ev.status, InboxStatus::Pending);
    let sessions = store.sessions_list(Some(&lane_key), 10).await.unwrap();
    assert_eq!(sessions.len(), 1);
    assert!(sessions[0].ended_at.is_none(), "stale close landed");
    assert!(store.session_get(&"s-f2".into()).await.unwrap().is_none());

    // The new holder writes fine: the refusals above were about the lease, not the data.
    let ids = store
        .append_messages(&new, &"s-f".into(), &m)
        .await
        .unwrap();
    assert_eq!(ids.len(), 1);

    // A current lease of another lane is no licence to write into this lane's session.
    let other = lease(&store, "web:g", "new", Duration::from_secs(60)).await;
    let wrong = store.append_messages(&other, &"s-f".into(), &m).await;
    assert!(
        wrong.is_err(),
        "write through another lane's lease: {wrong:?}"
    );
    assert!(store.turn_begin(&other, &"s-f".into(), None).await.is_err());
    assert!(store
        .session_close(&other, &"s-f".into(), "wrong lane")
        .await
        .is_err());
    assert!(store
        .session_create(&other, &session("s-g", lane))
        .await
        .is_err());
    assert_eq!(store.messages(&"s-f".into(), false).await.unwrap().len(), 2);
    assert_eq!(store.turns(&lane_key, 10).await.unwrap().len(), 1);
    assert!(store
        .session_get(&"s-f".into())
        .await
        .unwrap()
        .unwrap()
        .ended_at
        .is_none());
    assert!(store.session_get(&"s-g".into()).await.unwrap().is_none());
}

/// Two workers race for a free lease: exactly one wins, every round.
pub async fn lease_acquire_race(store: Arc<dyn Store>) {
    for round in 0..super::race_rounds(20) {
        let name = format!("web:race{round}");
        let ttl = Duration::from_secs(60);
        let (s1, s2) = (store.clone(), store.clone());
        let (n1, n2) = (name.clone(), name.clone());
        let t1 = tokio::spawn(async move { s1.lease_acquire(&n1, "one", ttl).await });
        let t2 = tokio::spawn(async move { s2.lease_acquire(&n2, "two", ttl).await });
        let (r1, r2) = (t1.await.unwrap(), t2.await.unwrap());
        let winners: Vec<_> = [r1, r2]
            .into_iter()
            .filter_map(|r| match r {
                Ok(l) => l,
                // A loser must be told "held", not fail on a busy database.
                Err(StoreError::Unavailable(e)) => panic!("round {round}: busy store: {e}"),
                Err(e) => panic!("round {round}: {e}"),
            })
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let info = store.lease_get(&name).await.unwrap().unwrap();
        assert_eq!(info.holder, winners[0].holder);
        assert_eq!(info.token, 1);
    }
}

/// A lane lease whose holder's replica died is taken at once; one of a live replica, or of a
/// replica with a similar name, is not.
pub async fn lease_taken_from_a_dead_replica(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    let long = Duration::from_secs(60);
    let liveness = Duration::from_secs(3);
    lease(&store, "replica:a", "a", liveness).await;
    lease(&store, "replica:ab", "ab", long).await;
    let held = lease(&store, "web:dead", "a/w1", long).await;
    lease(&store, "web:live", "ab/w1", long).await;

    let taken = store.lease_take_from_dead("web:dead", "b/w2", long).await;
    assert!(taken.unwrap().is_none(), "replica a is still alive");
    clock.advance(Duration::from_secs(4));
    let taken = store
        .lease_take_from_dead("web:dead", "b/w2", long)
        .await
        .unwrap()
        .expect("replica a's liveness ran out: its lane is free");
    assert_eq!(taken.token, held.token + 1);
    assert_eq!(
        store.lease_get("web:dead").await.unwrap().unwrap().holder,
        "b/w2"
    );
    assert!(matches!(
        store.lease_renew(&held, long).await,
        Err(StoreError::LeaseLost { .. })
    ));
    let live = store.lease_take_from_dead("web:live", "b/w2", long).await;
    assert!(
        live.unwrap().is_none(),
        "replica ab is alive, whatever a's state"
    );
    let again = store.lease_take_from_dead("web:dead", "c/w3", long).await;
    assert!(again.unwrap().is_none(), "b is not a dead replica's worker");
}
