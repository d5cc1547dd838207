//! The store contract: one suite of behaviours every `Store` backend must show, run against
//! SQLite (a fresh temp file per test) and Postgres (a fresh schema per test, when
//! `DATABASE_URL` is set). The lanes, the agent loop and the outbox sender rely on exactly
//! these outcomes; a backend that passes here can be swapped in without them noticing.
//!
//! This file holds the list of contracts and their fixtures; the contracts themselves live in
//! `tests/it/store_contract/`, the per-backend runner in `test-support/src/backends.rs`. Nothing here mocks the store: every test runs real SQL.

use std::sync::Arc;
use std::time::Duration;

use herald::domain::{MessageEvent, Platform};
use herald::store::{InboxInsert, Lease, NewOutbox, OutboxKey, Session, Store, StoreError};

use herald_test_support::contract;
mod approvals;
mod dead_letters;
mod delivery;
mod inbox_leases;
mod outbox;
mod pairing;
mod spend_agents;
mod text;
mod transcript;

contract!(unmigrated sqlite_migrate_twice_is_a_noop, postgres_migrate_twice_is_a_noop, inbox_leases::migrate_twice_is_a_noop);
contract!(unmigrated sqlite_migrations_apply_one_at_a_time, postgres_migrations_apply_one_at_a_time, inbox_leases::migrations_apply_one_at_a_time);
contract!(
    sqlite_inbox_dedup,
    postgres_inbox_dedup,
    inbox_leases::inbox_dedup
);
contract!(
    sqlite_inbox_take_counts_and_dead_letters,
    postgres_inbox_take_counts_and_dead_letters,
    dead_letters::take_counts_and_dead_letters
);
contract!(
    sqlite_outbox_send_attempts_count_before_the_send,
    postgres_outbox_send_attempts_count_before_the_send,
    dead_letters::outbox_send_attempts_count_before_the_send
);
contract!(
    sqlite_delivery_reports,
    postgres_delivery_reports,
    delivery::delivery_reports
);
contract!(
    sqlite_inbox_public_id,
    postgres_inbox_public_id,
    inbox_leases::inbox_public_id
);
contract!(
    sqlite_inbox_pending_and_skip,
    postgres_inbox_pending_and_skip,
    inbox_leases::inbox_pending_and_skip
);
contract!(
    clocked
    sqlite_lease_lifecycle,
    postgres_lease_lifecycle,
    inbox_leases::lease_lifecycle
);
contract!(
    clocked
    sqlite_lease_fencing,
    postgres_lease_fencing,
    inbox_leases::lease_fencing
);
contract!(
    clocked
    sqlite_leases_live_by_prefix,
    postgres_leases_live_by_prefix,
    inbox_leases::leases_live_by_prefix
);
contract!(
    clocked
    sqlite_lease_taken_from_a_dead_replica,
    postgres_lease_taken_from_a_dead_replica,
    inbox_leases::lease_taken_from_a_dead_replica
);
contract!(
    sqlite_lease_acquire_race,
    postgres_lease_acquire_race,
    inbox_leases::lease_acquire_race
);
contract!(
    sqlite_fail_reply_stops_its_own_chunks,
    postgres_fail_reply_stops_its_own_chunks,
    outbox::fail_reply_stops_its_own_chunks
);
contract!(sqlite_sessions, postgres_sessions, transcript::sessions);
contract!(
    sqlite_messages_round_trip,
    postgres_messages_round_trip,
    transcript::messages_round_trip
);
contract!(
    sqlite_compaction_flags,
    postgres_compaction_flags,
    transcript::compaction_flags
);
contract!(
    sqlite_turn_commit,
    postgres_turn_commit,
    transcript::turn_commit
);
contract!(
    sqlite_turn_begin_counts_attempts,
    postgres_turn_begin_counts_attempts,
    transcript::turn_begin_counts_attempts
);
contract!(sqlite_search, postgres_search, transcript::search);
contract!(
    sqlite_search_prefix,
    postgres_search_prefix,
    transcript::search_prefix
);
contract!(
    sqlite_search_roles,
    postgres_search_roles,
    transcript::search_roles
);
contract!(
    sqlite_search_odd_queries,
    postgres_search_odd_queries,
    transcript::search_odd_queries
);
contract!(
    sqlite_messages_around,
    postgres_messages_around,
    transcript::messages_around
);
contract!(
    clocked
    sqlite_outbox_claim_and_expiry,
    postgres_outbox_claim_and_expiry,
    outbox::claim_and_expiry
);
contract!(
    clocked
    sqlite_outbox_lane_order,
    postgres_outbox_lane_order,
    outbox::lane_order
);
contract!(
    clocked
    sqlite_outbox_sent_and_failed,
    postgres_outbox_sent_and_failed,
    outbox::sent_and_failed
);
contract!(
    sqlite_outbox_claim_race,
    postgres_outbox_claim_race,
    outbox::claim_race
);
contract!(
    clocked
    sqlite_dead_replica_claims_return,
    postgres_dead_replica_claims_return,
    outbox::dead_replica_claims_return
);
contract!(
    sqlite_approval_lifecycle,
    postgres_approval_lifecycle,
    approvals::approval_lifecycle
);
contract!(
    sqlite_pairing_lifecycle,
    postgres_pairing_lifecycle,
    pairing::pairing_lifecycle
);
contract!(
    clocked
    sqlite_pairing_cap_and_expiry,
    postgres_pairing_cap_and_expiry,
    pairing::pairing_cap_and_expiry
);
contract!(
    clocked
    sqlite_kv_and_lanes_overview,
    postgres_kv_and_lanes_overview,
    outbox::kv_and_lanes_overview
);

contract!(
    sqlite_nul_is_replaced_on_every_path,
    postgres_nul_is_replaced_on_every_path,
    text::nul_is_replaced_on_every_path
);
contract!(
    sqlite_kept_tool_results,
    postgres_kept_tool_results,
    text::kept_tool_results
);

// --- fixtures shared by the contract files ------------------------------------------------

/// A text event from web chat `chat`; each call gets a new platform message id.
pub fn event(chat: &str, text: &str) -> MessageEvent {
    MessageEvent::text(Platform::WEB, chat, "alice", text)
}

pub async fn insert(store: &Arc<dyn Store>, ev: &MessageEvent) -> i64 {
    match store.inbox_insert(ev).await.expect("inbox_insert") {
        InboxInsert::Inserted(id) => id,
        InboxInsert::Duplicate(id) => panic!("fresh event {id} reported as duplicate"),
    }
}

pub fn session(id: &str, lane: &str) -> Session {
    Session::new(
        id.to_string(),
        lane.into(),
        herald::store::now_ms(),
        "You are Herald.".to_string(),
        "test-model".to_string(),
    )
}

/// Takes a lease that must be free.
pub async fn lease(store: &Arc<dyn Store>, name: &str, holder: &str, ttl: Duration) -> Lease {
    store
        .lease_acquire(name, holder, ttl)
        .await
        .expect("lease_acquire")
        .unwrap_or_else(|| panic!("lease {name} should be free for {holder}"))
}

/// A lane's lease plus an open session in it, the state a worker is in mid-conversation.
pub async fn open_lane(store: &Arc<dyn Store>, lane: &str, session_id: &str) -> Lease {
    let l = lease(store, lane, "worker-a", Duration::from_secs(60)).await;
    store
        .session_create(&l, &session(session_id, lane))
        .await
        .expect("session_create");
    l
}

pub fn reply(lane: &str, key: &str, chunk: i64, inbox_id: Option<i64>) -> NewOutbox {
    let (platform, chat_id) = lane.split_once(':').unwrap_or(("web", lane));
    NewOutbox {
        key: OutboxKey::Single(key.to_string()),
        lane: herald::domain::LaneKey::parse(lane),
        platform: Platform::parse(platform).expect("a known platform"),
        chat_id: chat_id.to_string(),
        thread_id: None,
        reply_to: None,
        inbox_id,
        chunk_index: chunk,
        text: format!("chunk {chunk} of {key}"),
        media: None,
    }
}

/// Rounds for the race contracts; `HERALD_RACE_ROUNDS` raises them for a soak run.
pub fn race_rounds(default: usize) -> usize {
    std::env::var("HERALD_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn assert_lease_lost<T: std::fmt::Debug>(what: &str, r: Result<T, StoreError>) {
    match r {
        Err(StoreError::LeaseLost { .. }) => {}
        other => panic!("{what} by a stale holder: expected LeaseLost, got {other:?}"),
    }
}

/// A database that cannot be reached says so in words and keeps the driver's error beneath
/// them, so a log's error chain shows why.
#[tokio::test]
async fn unreachable_store_keeps_its_cause() {
    // Port 1 on loopback: refused at once, nothing listens there.
    let err = match herald::store::connect("postgres://herald@127.0.0.1:1/herald", 1).await {
        Err(e) => e,
        Ok(_) => panic!("a store on port 1 answered"),
    };
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("store unavailable: cannot connect to Postgres at 127.0.0.1:1"),
        "{err}"
    );
    let cause = std::error::Error::source(&err).expect("the store's words");
    let driver = cause.source().expect("the driver's error under them");
    assert!(!driver.to_string().is_empty());
}

/// Rows queued by a release before `0010_outbox_key` (version 9 of the schema).
const QUEUED_BEFORE_0010: &str = "INSERT INTO outbox \
     (idem_key, lane, platform, chat_id, chunk_index, text, status, created_at) VALUES \
     ('web:bf:5:turn:0', 'web:bf', 'web', 'bf', 0, 'a', 'pending', 1), \
     ('web:bf:5:turn:1', 'web:bf', 'web', 'bf', 1, 'b', 'pending', 1), \
     ('web:bf:4:turn:0', 'web:bf', 'web', 'bf', 0, 'c', 'sent', 1), \
     ('nocolon', 'web:bf', 'web', 'bf', 0, 'd', 'pending', 1)";

/// An upgraded install: rows queued before the reply became a column get it from their key,
/// and failing one of them stops the rest of its reply as for a row written today.
async fn backfilled_rows_keep_their_reply(
    store: Arc<dyn Store>,
    insert_raw: impl std::future::Future<Output = ()>,
) {
    store.migrate_to(9).await.expect("migrate to 9");
    insert_raw.await;
    store.migrate().await.expect("migrate the rest");
    let rows = store.outbox_recent(10).await.unwrap();
    let reply_of = |key: &str| {
        let row = rows.iter().find(|r| r.idem_key == key).expect(key);
        row.reply().map(|r| r.as_str().to_string())
    };
    assert_eq!(
        reply_of("web:bf:5:turn:0").as_deref(),
        Some("web:bf:5:turn")
    );
    assert_eq!(
        reply_of("web:bf:5:turn:1").as_deref(),
        Some("web:bf:5:turn")
    );
    assert_eq!(
        reply_of("web:bf:4:turn:0"),
        None,
        "a sent row is left as it was"
    );
    assert_eq!(reply_of("nocolon"), None);

    let web = vec!["web".to_string()];
    let claimed = store
        .outbox_claim("a", &web, 1, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(claimed[0].idem_key, "web:bf:5:turn:0");
    let reply = claimed[0].reply().unwrap();
    store
        .outbox_mark_retry(claimed[0].id, "a", "403", 0, true)
        .await
        .unwrap();
    let stopped = store
        .outbox_fail_reply(&claimed[0], &reply, None)
        .await
        .unwrap();
    assert_eq!(stopped, 1, "the second chunk of the backfilled reply");
}

#[tokio::test]
async fn sqlite_backfilled_rows_keep_their_reply() {
    use sqlx::{Connection, Executor};
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    let store = herald::store::connect(&url, 2).await.expect("open sqlite");
    let raw = async {
        let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
        c.execute(QUEUED_BEFORE_0010).await.unwrap();
    };
    backfilled_rows_keep_their_reply(store, raw).await;
}

#[tokio::test]
async fn postgres_backfilled_rows_keep_their_reply() {
    herald_test_support::backends::in_fresh_pg_schema("herald_test", |url| async move {
        use sqlx::{Connection, Executor};
        let store = herald::store::connect(&url, 2)
            .await
            .expect("open postgres");
        let raw = async {
            let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
            c.execute(QUEUED_BEFORE_0010).await.unwrap();
        };
        use futures::FutureExt;
        std::panic::AssertUnwindSafe(backfilled_rows_keep_their_reply(store, raw))
            .catch_unwind()
            .await
    })
    .await;
}

/// The keys the lanes build are the text earlier releases wrote: rows already queued by them
/// keep their place as the idempotency key of the same reply.
#[test]
fn outbox_keys_keep_the_text_earlier_releases_wrote() {
    use herald::domain::LaneKey;
    use herald::store::ReplyKey;
    let lane = LaneKey::parse("telegram:42");
    let turn = ReplyKey::answer(&lane, 7, "turn");
    assert_eq!(
        OutboxKey::chunk(turn.clone(), 2).idem_key(),
        "telegram:42:7:turn:2"
    );
    assert_eq!(
        OutboxKey::chunk(turn.notice(), 0).idem_key(),
        "telegram:42:7:turn:notice:0"
    );
    assert!(turn.notice().is_notice() && !turn.is_notice());
    let web = LaneKey::parse("web:a");
    assert_eq!(
        OutboxKey::chunk(ReplyKey::brief(&web, &lane, 7), 0).idem_key(),
        "web:a:telegram:42:7:brief:0"
    );
    assert_eq!(
        OutboxKey::chunk(ReplyKey::sent(&lane, 7, 3), 1).idem_key(),
        "send:telegram:42:7:3:1"
    );
}
contract!(
    sqlite_agent_caps_count_their_agents_rows,
    postgres_agent_caps_count_their_agents_rows,
    spend_agents::agent_caps_count_their_agents_rows
);
