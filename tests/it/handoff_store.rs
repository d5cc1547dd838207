//! The handoff part of the store contract, on SQLite (a fresh temp file per test) and on
//! Postgres (a fresh schema per test, when `DATABASE_URL` is set): one pending marker per lane,
//! taken once and never by the session it summarizes, stale markers deleted unread, and at most
//! one build per lane across replicas.

use std::sync::Arc;
use std::time::Duration;

use herald::domain::{BuildStatus, LaneKey};
use herald::store::{now_ms, NewCapsule, Store};

use herald::store::clock::ManualClock;
use herald_test_support::contract;

const HOUR_MS: i64 = 3_600_000;
const MAX_AGE: Duration = Duration::from_secs(36 * 3600);

contract!(sqlite_marker_rules, postgres_marker_rules, marker_rules);
contract!(
    sqlite_new_capsule_replaces_marker,
    postgres_new_capsule_replaces_marker,
    replaces
);
contract!(
    sqlite_stale_marker_deleted_unread,
    postgres_stale_marker_deleted_unread,
    stale
);
contract!(
    sqlite_consume_race_exactly_once,
    postgres_consume_race_exactly_once,
    race
);
contract!(
    sqlite_marker_scoped_by_agent,
    postgres_marker_scoped_by_agent,
    by_agent
);
contract!(
    clocked
    sqlite_one_build_per_lane,
    postgres_one_build_per_lane,
    build_claim
);

fn capsule(
    lane: &LaneKey,
    session: &str,
    status: BuildStatus,
    text: &str,
    age_ms: i64,
) -> NewCapsule {
    NewCapsule {
        lane: lane.clone(),
        session_id: session.into(),
        status,
        text: text.into(),
        message_count: 6,
        confidential: false,
        created_at: now_ms() - age_ms,
        agent: "default".into(),
    }
}

async fn marker_rules(store: Arc<dyn Store>) {
    let lane = LaneKey::new("web:rules");
    let id = store
        .capsule_put(
            &capsule(&lane, "s1", BuildStatus::Ok, "## Working on\nmirror fix", 0),
            true,
        )
        .await
        .unwrap();
    // The summarized session asks: nothing, and the marker stays.
    let own = store
        .pending_consume(&lane, &"s1".into(), MAX_AGE, now_ms())
        .await
        .unwrap();
    assert_eq!(own.capsule, None);
    assert!(store.capsule_latest(&lane).await.unwrap().unwrap().pending);
    // Another lane's session never sees it.
    let other = LaneKey::new("web:elsewhere");
    assert_eq!(
        store
            .pending_consume(&other, &"s2".into(), MAX_AGE, now_ms())
            .await
            .unwrap()
            .capsule,
        None
    );
    // A new session gets it once.
    let got = store
        .pending_consume(&lane, &"s2".into(), MAX_AGE, now_ms())
        .await
        .unwrap();
    let c = got.capsule.expect("the new session receives the capsule");
    assert_eq!(
        (c.id, c.text.as_str(), c.session_id.as_str()),
        (id, "## Working on\nmirror fix", "s1")
    );
    // Its first turn was abandoned before committing (killed, lease lost): the retried first
    // turn of the same session receives the same capsule, not nothing.
    let again = store
        .pending_consume(&lane, &"s2".into(), MAX_AGE, now_ms())
        .await
        .unwrap();
    assert_eq!(again.capsule.map(|c| c.id), Some(id));
    assert_eq!(
        store
            .pending_consume(&lane, &"s3".into(), MAX_AGE, now_ms())
            .await
            .unwrap()
            .capsule,
        None
    );
    let latest = store.capsule_latest(&lane).await.unwrap().unwrap();
    assert_eq!((latest.status, latest.pending), (BuildStatus::Ok, false));

    // A failed build is recorded for operators but is not a capsule to hand over or build on.
    store
        .capsule_put(&capsule(&lane, "s3", BuildStatus::TooShort, "", 0), false)
        .await
        .unwrap();
    assert_eq!(
        store.capsule_latest(&lane).await.unwrap().unwrap().status,
        BuildStatus::TooShort
    );
    assert_eq!(
        store
            .capsule_latest_written(&lane)
            .await
            .unwrap()
            .unwrap()
            .id,
        id
    );
    assert_eq!(
        store
            .pending_consume(&lane, &"s4".into(), MAX_AGE, now_ms())
            .await
            .unwrap()
            .capsule,
        None
    );
}

async fn replaces(store: Arc<dyn Store>) {
    let lane = LaneKey::new("telegram:42");
    store
        .capsule_put(&capsule(&lane, "s1", BuildStatus::Ok, "first", 0), true)
        .await
        .unwrap();
    let second = store
        .capsule_put(
            &capsule(&lane, "s2", BuildStatus::Degraded, "second", 0),
            true,
        )
        .await
        .unwrap();
    let got = store
        .pending_consume(&lane, &"s3".into(), MAX_AGE, now_ms())
        .await
        .unwrap();
    assert_eq!(
        got.capsule.map(|c| (c.id, c.text)),
        Some((second, "second".to_string()))
    );
    assert_eq!(
        store
            .pending_consume(&lane, &"s4".into(), MAX_AGE, now_ms())
            .await
            .unwrap()
            .capsule,
        None
    );
}

async fn stale(store: Arc<dyn Store>) {
    let old = LaneKey::new("web:old");
    store
        .capsule_put(
            &capsule(
                &old,
                "s1",
                BuildStatus::Ok,
                "last week's plan",
                37 * HOUR_MS,
            ),
            true,
        )
        .await
        .unwrap();
    let got = store
        .pending_consume(&old, &"s2".into(), MAX_AGE, now_ms())
        .await
        .unwrap();
    assert_eq!(
        (got.capsule, got.expired),
        (None, 1),
        "a 37 h old marker is deleted unread"
    );
    assert!(!store.capsule_latest(&old).await.unwrap().unwrap().pending);

    let recent = LaneKey::new("web:recent");
    store
        .capsule_put(
            &capsule(&recent, "s1", BuildStatus::Ok, "yesterday", 35 * HOUR_MS),
            true,
        )
        .await
        .unwrap();
    let got = store
        .pending_consume(&recent, &"s2".into(), MAX_AGE, now_ms())
        .await
        .unwrap();
    assert_eq!(got.capsule.map(|c| c.text), Some("yesterday".to_string()));
}

async fn race(store: Arc<dyn Store>) {
    const LANES: usize = 12;
    for i in 0..LANES {
        let lane = LaneKey::new(&format!("web:race{i}"));
        store
            .capsule_put(&capsule(&lane, "old", BuildStatus::Ok, "x", 0), true)
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for i in 0..LANES {
        for worker in ["replica-a", "replica-b"] {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let lane = LaneKey::new(&format!("web:race{i}"));
                let got = store
                    .pending_consume(
                        &lane,
                        &format!("{worker}-session").into(),
                        MAX_AGE,
                        now_ms(),
                    )
                    .await
                    .unwrap();
                (i, got.capsule.is_some())
            }));
        }
    }
    let mut taken = [0usize; LANES];
    for t in tasks {
        let (i, got) = t.await.unwrap();
        taken[i] += usize::from(got);
    }
    assert_eq!(taken, [1; LANES], "every marker is taken exactly once");
}

async fn build_claim(store: Arc<dyn Store>, clock: Arc<ManualClock>) {
    let lane = LaneKey::new("web:claim");
    let long = Duration::from_secs(60);
    assert!(store.handoff_claim(&lane, "a/1", long).await.unwrap());
    assert!(
        !store.handoff_claim(&lane, "b/1", long).await.unwrap(),
        "one build per lane"
    );
    store.handoff_release(&lane, "b/1").await.unwrap();
    assert!(
        !store.handoff_claim(&lane, "b/1", long).await.unwrap(),
        "only the holder releases"
    );
    store.handoff_release(&lane, "a/1").await.unwrap();
    assert!(store.handoff_claim(&lane, "b/1", long).await.unwrap());

    // A claim from a crashed replica expires.
    let other = LaneKey::new("web:crashed");
    assert!(store
        .handoff_claim(&other, "dead/1", Duration::ZERO)
        .await
        .unwrap());
    clock.advance(Duration::from_millis(5));
    assert!(store.handoff_claim(&other, "live/1", long).await.unwrap());

    // Racing claims: exactly one wins.
    let raced = LaneKey::new("web:raced");
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let store = store.clone();
            let lane = raced.clone();
            tokio::spawn(async move {
                store
                    .handoff_claim(&lane, &format!("r/{i}"), long)
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut wins = 0;
    for t in tasks {
        wins += usize::from(t.await.unwrap());
    }
    assert_eq!(wins, 1);
}

/// A lane keeps one marker per agent: a session of another agent takes nothing, and a capsule
/// of agent B does not replace agent A's, which waits for A's next session.
async fn by_agent(store: Arc<dyn Store>) {
    let lane = LaneKey::new("web:agents");
    let of = |agent: &str, session: &str, text: &str| NewCapsule {
        agent: agent.into(),
        ..capsule(&lane, session, BuildStatus::Ok, text, 0)
    };
    let a = store
        .capsule_put(&of("family", "s1", "## Working on\nthe picnic"), true)
        .await
        .unwrap();
    let take = |agent: &'static str, session: &'static str| {
        let (store, lane) = (store.clone(), lane.clone());
        async move {
            let session = session.into();
            let t = store.pending_consume_for(&lane, agent, &session, MAX_AGE, now_ms());
            t.await.unwrap().capsule.map(|c| (c.id, c.agent))
        }
    };
    // A session of the coding agent (and of the default agent) gets nothing.
    assert_eq!(take("coding", "s2").await, None);
    assert_eq!(take("default", "s3").await, None);
    // The coding agent's own capsule does not replace the family agent's marker.
    let b = store
        .capsule_put(&of("coding", "s2", "## Working on\nthe parser"), true)
        .await
        .unwrap();
    assert_eq!(take("family", "s4").await, Some((a, "family".to_string())));
    assert_eq!(take("coding", "s5").await, Some((b, "coding".to_string())));
    // The writer builds on the same agent's previous capsule only.
    let prev = |agent: &'static str| {
        let (store, lane) = (store.clone(), lane.clone());
        async move {
            let c = store.capsule_latest_written_for(&lane, Some(agent)).await;
            c.unwrap().map(|c| c.id)
        }
    };
    assert_eq!(
        (prev("family").await, prev("coding").await),
        (Some(a), Some(b))
    );
    assert_eq!(prev("support").await, None);
}
