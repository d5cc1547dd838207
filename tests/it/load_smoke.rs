//! Keeps the Telegram load driver of `benches/load.rs` from rotting: the same driver, on the
//! debug `herald` binary, in both ways in (polling and webhook), at a size the suite affords.
//! Every message must be answered exactly once.

use std::time::Duration;

use herald_test_support::telegram_load::{Plan, Rig, RigOpts, Shape};

async fn closed_loop(webhook: bool, chats: usize, messages: usize) {
    let rig = Rig::start(webhook, None, &[]).await;
    let plan = Plan {
        chats,
        first_chat: 10_000,
        shape: Shape::Closed {
            messages,
            think: Duration::ZERO,
        },
        reply_timeout: Duration::from_secs(30),
    };
    let outcome = rig.run(&plan, Duration::from_millis(500)).await;
    let log = rig.gateway.log_tail();
    rig.finish().await;
    let t = &outcome.tally;
    assert_eq!(
        (
            outcome.replies(),
            t.lost,
            t.duplicates,
            t.unexpected,
            outcome.send_errors
        ),
        (chats * messages, 0, 0, 0, 0),
        "(replies, lost, duplicated, unexpected, send errors); daemon log:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_five_chats_three_messages_each_answered_once() {
    closed_loop(false, 5, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_three_chats_two_messages_each_answered_once() {
    closed_loop(true, 3, 2).await;
}

/// The echo floor the load matrix compares Herald with (`examples/echo_floor.rs`, built by
/// `scripts/test`): same driver, every message answered once, and its counting
/// allocator answers, so the matrix can divide by its turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_floor_answers_each_message_once_and_reports_its_allocations() {
    let bin = herald_test_support::telegram_load::gateway::floor_bin();
    assert!(
        bin.exists(),
        "{} is missing: cargo build --example echo_floor (scripts/test builds it)",
        bin.display()
    );
    let rig = Rig::start_with(RigOpts {
        floor: true,
        ..RigOpts::default()
    })
    .await;
    let before = rig.gateway.allocations().await;
    let plan = Plan {
        chats: 4,
        first_chat: 10_000,
        shape: Shape::Closed {
            messages: 3,
            think: Duration::ZERO,
        },
        reply_timeout: Duration::from_secs(30),
    };
    let outcome = rig.run(&plan, Duration::from_millis(300)).await;
    let after = rig.gateway.allocations().await;
    let log = rig.gateway.log_tail();
    rig.finish().await;
    let t = &outcome.tally;
    assert_eq!(
        (outcome.replies(), t.lost, t.duplicates, t.unexpected),
        (12, 0, 0, 0),
        "(replies, lost, duplicated, unexpected); floor log:\n{log}"
    );
    let (before, after) = (
        before.expect("floor counts")[0],
        after.expect("floor counts")[0],
    );
    assert!(
        after.0 > before.0 && after.1 > before.1,
        "the floor's allocations did not grow over 12 turns: {before:?} → {after:?}"
    );
}
