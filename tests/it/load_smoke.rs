//! Keeps the Telegram load driver of `benches/load.rs` from rotting: the same driver, on the
//! debug `herald` binary, in both ways in (polling and webhook), at a size the suite affords.
//! Every message must be answered exactly once.

use std::time::Duration;

use herald_test_support::telegram_load::{Plan, Rig, Shape};

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
