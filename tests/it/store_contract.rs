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
use herald::store::{InboxInsert, Lease, NewOutbox, Session, Store, StoreError};

use herald_test_support::contract;
mod approvals;
mod inbox_leases;
mod outbox;
mod pairing;
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
    sqlite_inbox_pending_and_skip,
    postgres_inbox_pending_and_skip,
    inbox_leases::inbox_pending_and_skip
);
contract!(
    sqlite_lease_lifecycle,
    postgres_lease_lifecycle,
    inbox_leases::lease_lifecycle
);
contract!(
    sqlite_lease_fencing,
    postgres_lease_fencing,
    inbox_leases::lease_fencing
);
contract!(
    sqlite_leases_live_by_prefix,
    postgres_leases_live_by_prefix,
    inbox_leases::leases_live_by_prefix
);
contract!(
    sqlite_lease_acquire_race,
    postgres_lease_acquire_race,
    inbox_leases::lease_acquire_race
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
    sqlite_outbox_claim_and_expiry,
    postgres_outbox_claim_and_expiry,
    outbox::claim_and_expiry
);
contract!(
    sqlite_outbox_lane_order,
    postgres_outbox_lane_order,
    outbox::lane_order
);
contract!(
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
    sqlite_pairing_cap_and_expiry,
    postgres_pairing_cap_and_expiry,
    pairing::pairing_cap_and_expiry
);
contract!(
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
    MessageEvent::text(Platform::Web, chat, "alice", text)
}

pub async fn insert(store: &Arc<dyn Store>, ev: &MessageEvent) -> i64 {
    match store.inbox_insert(ev).await.expect("inbox_insert") {
        InboxInsert::Inserted(id) => id,
        InboxInsert::Duplicate(id) => panic!("fresh event {id} reported as duplicate"),
    }
}

pub fn session(id: &str, lane: &str) -> Session {
    Session {
        id: id.to_string(),
        lane: lane.to_string(),
        parent_id: None,
        started_at: herald::store::now_ms(),
        ended_at: None,
        end_reason: None,
        system_prompt: "You are Herald.".to_string(),
        model: "test-model".to_string(),
        compaction_strikes: 0,
        fallback_streak: 0,
        cooldown_until: None,
    }
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
        idem_key: key.to_string(),
        lane: herald::domain::LaneKey::parse(lane),
        platform: Platform::parse(platform).expect("a known platform"),
        chat_id: chat_id.to_string(),
        thread_id: None,
        reply_to: None,
        inbox_id,
        chunk_index: chunk,
        text: format!("chunk {chunk} of {key}"),
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
