//! Group commit (`TurnStore::turn_steps`): several lanes' turn starts and commits land in one
//! transaction, and a lane the store refuses, or whose rows the database rejects, never keeps
//! the others' from landing. Runs on SQLite and on Postgres, each with a trigger that rejects
//! one lane's message the way a database error mid-commit would.

use std::sync::Arc;

use herald::domain::{LaneKey, Role};
use herald::store::{
    InboxAttempt, InboxStatus, Lease, NewMessage, SessionId, Store, StoreError, TurnCommit,
    TurnStep, TurnStepDone,
};
use herald_test_support::backends::{in_fresh_pg_schema, Outcome};
use sqlx::{Connection, Executor};

use crate::store_contract::{event, insert, lease, open_lane, reply};

const SQLITE_TRIGGER: &str = "CREATE TRIGGER boom BEFORE INSERT ON messages \
     WHEN NEW.content = 'boom' BEGIN SELECT RAISE(ABORT, 'boom is refused'); END";
const PG_TRIGGER: [&str; 2] = [
    "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
       IF NEW.content = 'boom' THEN RAISE EXCEPTION 'boom is refused'; END IF; RETURN NEW; END $$",
    "CREATE TRIGGER boom BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION boom()",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_group_commit_lands_each_lane_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    let store = herald::store::connect(&url, 4).await.expect("open sqlite");
    store.migrate().await.expect("migrate");
    let mut raw = sqlx::SqliteConnection::connect(&url).await.expect("raw");
    raw.execute(SQLITE_TRIGGER).await.expect("trigger");
    raw.close().await.expect("close");
    lands_each_lane_alone(store.clone(), None).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_group_commit_lands_each_lane_alone() {
    in_fresh_pg_schema("herald_group", |url| async move {
        let store = herald::store::connect(&url, 4)
            .await
            .expect("open postgres");
        store.migrate().await.expect("migrate");
        let mut raw = sqlx::PgConnection::connect(&url).await.expect("raw");
        for sql in PG_TRIGGER {
            raw.execute(sql).await.expect("trigger");
        }
        let outcome: Outcome = tokio::spawn(lands_each_lane_alone(store.clone(), Some(url)))
            .await
            .map_err(|e| e.into_panic());
        raw.close().await.expect("close");
        store.close().await;
        outcome
    })
    .await;
}

/// A lane ready to commit: its lease, session, inbox row and begun turn.
struct Ready {
    lane: &'static str,
    lease: Lease,
    session: SessionId,
    inbox: i64,
    turn: i64,
}

/// `pg`: the Postgres URL, to read which transaction wrote the started turns.
async fn lands_each_lane_alone(store: Arc<dyn Store>, pg: Option<String>) {
    let lanes = ["web:ga", "web:gb", "web:gc", "web:gd", "web:ge"];
    let mut begins = Vec::new();
    let mut open = Vec::new();
    for lane in lanes {
        let session = format!("s-{lane}");
        let l = open_lane(&store, lane, &session).await;
        let inbox = insert(&store, &event(&lane[4..], "hello")).await;
        begins.push(TurnStep::Begin {
            lease: l.clone(),
            session_id: session.as_str().into(),
            inbox: Some(InboxAttempt::first(inbox)),
            sweep: true,
        });
        open.push((lane, l, SessionId::from(session.as_str()), inbox));
    }
    // Five starts in one transaction: five turns, in the steps' order.
    let begun = store.turn_steps(begins).await;
    let mut ready = Vec::new();
    for ((lane, lease, session, inbox), r) in open.into_iter().zip(begun) {
        let Ok(TurnStepDone::Begun(turn)) = r else {
            panic!("{lane}: start refused: {r:?}");
        };
        ready.push(Ready {
            lane,
            lease,
            session,
            inbox,
            turn,
        });
    }
    let ids: std::collections::HashSet<i64> = ready.iter().map(|r| r.turn).collect();
    assert_eq!(ids.len(), 5, "each start has its own turn");
    for r in &ready {
        let turns = store.turns(&LaneKey::new(r.lane), 10).await.unwrap();
        assert_eq!(turns.iter().map(|t| t.id).collect::<Vec<_>>(), [r.turn]);
        assert_eq!(store.inbox_get(r.inbox).await.unwrap().unwrap().attempts, 1);
    }

    if let Some(url) = pg {
        // Postgres names the transaction that wrote a row version (`xmin`): one for all five.
        let mut raw = sqlx::PgConnection::connect(&url).await.expect("raw");
        let (writers,): (i64,) =
            sqlx::query_as("SELECT count(DISTINCT xmin::text) FROM turns WHERE id = ANY($1)")
                .bind(ids.iter().copied().collect::<Vec<i64>>())
                .fetch_one(&mut raw)
                .await
                .expect("xmin");
        assert_eq!(
            writers, 1,
            "the five starts landed in {writers} transactions"
        );
        raw.close().await.expect("close");
    }

    // Lane b's lease moved on: its commit is refused, lane a's lands beside it.
    let [a, b, c, d, e] = <[Ready; 5]>::try_from(ready).ok().expect("five lanes");
    store.lease_release(&b.lease).await.unwrap();
    lease(
        &store,
        b.lane,
        "worker-b",
        std::time::Duration::from_secs(60),
    )
    .await;
    let group = store
        .turn_steps(vec![commit(&a, "hi a"), commit(&b, "hi b")])
        .await;
    assert!(
        matches!(group[0], Ok(TurnStepDone::Committed(_))),
        "{group:?}"
    );
    assert!(
        matches!(group[1], Err(StoreError::LeaseLost { .. })),
        "{group:?}"
    );
    answered(&store, &a, "hi a").await;
    unanswered(&store, &b).await;

    // The database rejects lane c's message mid-group: c fails alone, d and e land.
    let group = store
        .turn_steps(vec![
            commit(&c, "boom"),
            commit(&d, "hi d"),
            commit(&e, "hi e"),
        ])
        .await;
    let err = group[0]
        .as_ref()
        .expect_err("the rejected row fails its lane");
    assert!(err.to_string().contains("boom is refused"), "{err}");
    assert!(
        matches!(group[1], Ok(TurnStepDone::Committed(_))),
        "{group:?}"
    );
    assert!(
        matches!(group[2], Ok(TurnStepDone::Committed(_))),
        "{group:?}"
    );
    unanswered(&store, &c).await;
    answered(&store, &d, "hi d").await;
    answered(&store, &e, "hi e").await;
}

fn commit(r: &Ready, answer: &str) -> TurnStep {
    let mut c = TurnCommit::new(r.turn, &r.session, Some(r.inbox), InboxStatus::Done);
    c.messages = vec![
        NewMessage::new(Role::User, "hello"),
        NewMessage::new(Role::Assistant, answer),
    ];
    c.outbox = vec![reply(r.lane, &format!("{}:1", r.lane), 0, Some(r.inbox))];
    TurnStep::Commit {
        lease: r.lease.clone(),
        commit: Arc::new(c),
        context: Box::new(|_| None),
    }
}

/// The lane's person has their answer: the transcript, the queued chunk, the inbox mark and
/// the turn row.
async fn answered(store: &Arc<dyn Store>, r: &Ready, answer: &str) {
    let msgs = store.messages(&r.session, true).await.unwrap();
    let texts: Vec<_> = msgs.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(texts, ["hello", answer], "{}", r.lane);
    assert_eq!(
        store.outbox_for_inbox(r.inbox).await.unwrap().len(),
        1,
        "{}",
        r.lane
    );
    let row = store.inbox_get(r.inbox).await.unwrap().unwrap();
    assert_eq!(row.status, InboxStatus::Done, "{}", r.lane);
    let turns = store.turns(&LaneKey::new(r.lane), 10).await.unwrap();
    assert_eq!(turns[0].status, "done", "{}", r.lane);
}

/// Nothing of the lane's commit landed: its message still waits for a turn.
async fn unanswered(store: &Arc<dyn Store>, r: &Ready) {
    assert!(
        store.messages(&r.session, true).await.unwrap().is_empty(),
        "{}",
        r.lane
    );
    assert!(
        store.outbox_for_inbox(r.inbox).await.unwrap().is_empty(),
        "{}",
        r.lane
    );
    let row = store.inbox_get(r.inbox).await.unwrap().unwrap();
    assert_eq!(row.status, InboxStatus::Pending, "{}", r.lane);
}
