//! The nightly closer's part of the store contract, on SQLite (a fresh temp file per test) and
//! on Postgres (a fresh schema per test, when `DATABASE_URL` is set): which conversations a
//! night's pass takes — the guard rails — and a budget that no number of passes can overrun.

use std::sync::Arc;
use std::time::Duration;

use herald::domain::SessionId;
use herald::domain::{BuildStatus, LaneKey, MessageEvent, Platform, Role};
use herald::store::{now_ms, CandidateQuery, NewCapsule, NewMessage, Session, Store};

use herald_test_support::contract;

const MIN_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MIN_MS;

contract!(
    sqlite_candidates_follow_the_guard_rails,
    postgres_candidates_follow_the_guard_rails,
    guard_rails
);
contract!(
    sqlite_budget_never_overrun,
    postgres_budget_never_overrun,
    budget
);

/// Opens a session in `lane` with `n` messages alternating user/assistant; returns its id.
async fn conversation(store: &Arc<dyn Store>, lane: &str, n: usize) -> String {
    let lease = store
        .lease_acquire(lane, "test", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let id = format!("s-{}", uuid::Uuid::new_v4().simple());
    let session = Session::new(id.clone(), lane.into(), now_ms(), "sys", "m");
    store.session_create(&lease, &session).await.unwrap();
    let msgs: Vec<NewMessage> = (0..n)
        .map(|i| {
            let role = if i % 2 == 0 {
                Role::User
            } else {
                Role::Assistant
            };
            NewMessage::new(role, format!("message {i} in {lane}"))
        })
        .collect();
    store
        .append_messages(&lease, &SessionId::from(&id), &msgs)
        .await
        .unwrap();
    store.lease_release(&lease).await.unwrap();
    // Messages are stamped in milliseconds: keep each lane's last message distinct in time.
    tokio::time::sleep(Duration::from_millis(5)).await;
    id
}

fn capsule(lane: &str, session: &str, status: BuildStatus) -> NewCapsule {
    NewCapsule {
        lane: lane.into(),
        session_id: session.into(),
        status,
        text: if status == BuildStatus::Ok {
            "## Working on\nx".into()
        } else {
            String::new()
        },
        message_count: 6,
        confidential: false,
        created_at: now_ms(),
        agent: "default".into(),
    }
}

async fn guard_rails(store: Arc<dyn Store>) {
    conversation(&store, "web:oldest", 6).await;
    conversation(&store, "web:five", 5).await;
    conversation(&store, "web:six", 6).await;
    conversation(&store, "cron:brief", 6).await;
    let done = conversation(&store, "web:capsuled", 6).await;
    store
        .capsule_put(&capsule("web:capsuled", &done, BuildStatus::Ok), true)
        .await
        .unwrap();
    // A build that wrote nothing does not protect the session: the next night tries again.
    let failed = conversation(&store, "web:failed", 6).await;
    store
        .capsule_put(
            &capsule("web:failed", &failed, BuildStatus::WriteFailed),
            false,
        )
        .await
        .unwrap();
    let closed = conversation(&store, "web:closed", 6).await;
    let lease = store
        .lease_acquire("web:closed", "test", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    store
        .session_close(&lease, &SessionId::from(&closed), "new")
        .await
        .unwrap();
    store.lease_release(&lease).await.unwrap();
    conversation(&store, "web:waiting", 6).await;
    store
        .inbox_insert(&MessageEvent::text(
            Platform::WEB,
            "waiting",
            "u",
            "still there?",
        ))
        .await
        .unwrap();
    conversation(&store, "web:newest", 6).await;
    let t = now_ms();

    // (case, now, min messages, cap, lanes taken in order)
    let day = 24 * HOUR_MS;
    let cases: Vec<(&str, i64, i64, i64, Vec<&str>)> = vec![
        (
            "idle 2 h, active within 3 days",
            t + 2 * HOUR_MS,
            6,
            20,
            vec!["web:oldest", "web:six", "web:failed", "web:newest"],
        ),
        ("idle only 10 min", t + 10 * MIN_MS, 6, 20, vec![]),
        ("last active 4 days ago", t + 4 * day, 6, 20, vec![]),
        (
            "last active just inside 3 days",
            t + 3 * day - MIN_MS,
            6,
            20,
            vec!["web:oldest", "web:six", "web:failed", "web:newest"],
        ),
        (
            "cap 2 takes the longest idle",
            t + 2 * HOUR_MS,
            6,
            2,
            vec!["web:oldest", "web:six"],
        ),
        (
            "five messages pass a lower minimum",
            t + 2 * HOUR_MS,
            5,
            20,
            vec![
                "web:oldest",
                "web:five",
                "web:six",
                "web:failed",
                "web:newest",
            ],
        ),
    ];
    for (name, now, min_messages, cap, want) in cases {
        let got = store
            .nightly_candidates(&CandidateQuery {
                min_messages,
                active_since: now - 72 * HOUR_MS,
                idle_before: now - 60 * MIN_MS,
                limit: cap,
            })
            .await
            .unwrap();
        let lanes: Vec<&str> = got.iter().map(|c| c.lane.as_str()).collect();
        assert_eq!(lanes, want, "{name}");
        assert!(got.iter().all(|c| c.messages >= min_messages), "{name}");
    }

    // The chat behind a lane key comes from its newest inbox event.
    let ev = store
        .lane_last_event(&LaneKey::new("web:waiting"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (ev.platform, ev.chat_id.as_str()),
        (Platform::WEB, "waiting")
    );
    assert!(store
        .lane_last_event(&LaneKey::new("web:oldest"))
        .await
        .unwrap()
        .is_none());
}

async fn budget(store: Arc<dyn Store>) {
    let night = "handoff-nightly:2026-05-01T03:00:00Z";
    let mut taken = Vec::new();
    for _ in 0..4 {
        taken.push(store.nightly_reserve(night, 2, now_ms()).await.unwrap());
    }
    assert_eq!(taken, vec![Some(1), Some(2), None, None]);
    // Another night has a budget of its own; a zero cap takes nothing.
    let next = "handoff-nightly:2026-05-02T03:00:00Z";
    assert_eq!(
        store.nightly_reserve(next, 2, now_ms()).await.unwrap(),
        Some(1)
    );
    assert_eq!(
        store.nightly_reserve("zero", 0, now_ms()).await.unwrap(),
        None
    );

    // Passes racing on one night (a replica whose role lease lapsed): the cap still holds.
    let race = "handoff-nightly:race";
    let tasks: Vec<_> = (0..12)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.nightly_reserve(race, 5, now_ms()).await.unwrap() })
        })
        .collect();
    let mut got = Vec::new();
    for t in tasks {
        got.extend(t.await.unwrap());
    }
    got.sort();
    assert_eq!(got, vec![1, 2, 3, 4, 5]);
}
