//! SIGKILL after a correction joined the running turn: the real `herald` binary is killed while
//! the model writes the answer that covers both messages, and starts again on the same store.
//! The retried turn takes the correction again (it stayed pending until the turn's commit), so
//! nothing is lost and the person gets exactly one answer.

use std::time::Duration;

use herald::store::InboxStatus;
use herald_test_support::db::Db;
use herald_test_support::fake_llm::{text_of, FakeLlm, Step};
use herald_test_support::harness::{quiet, wait_until};
use herald_test_support::herald::{Herald, Running};
use herald_test_support::on_each_backend;
use herald_test_support::telegram::{fakes, TOKEN, USER};

use super::CORRECTION;

fn spawn_daemon(data: &std::path::Path, db: &Db, llm: &FakeLlm, tg_url: &str) -> Running {
    let mut h = Herald::serve_anywhere(data)
        .fake_model(&llm.base_url())
        .env("HERALD_LLM__TIMEOUT_SECS", "60")
        .fast_leases()
        .env("HERALD_TELEGRAM__TOKEN", TOKEN)
        .env("HERALD_TELEGRAM__API_URL", tg_url)
        .env("HERALD_TELEGRAM__ALLOW_ALL_USERS", "true")
        .env("HERALD_TELEGRAM__POLL_TIMEOUT_SECS", "1")
        // Asserts unstreamed sends (one message per answer).
        .env("HERALD_STREAMING__ENABLED", "false")
        .env("HERALD_LOG__LEVEL", "warn");
    if let Db::Postgres(url) = db {
        h = h.env("HERALD_STORE__URL", url);
    }
    h.spawn()
}

fn store_url(data: &std::path::Path, db: &Db) -> String {
    match db {
        Db::Postgres(url) => url.clone(),
        Db::Sqlite => format!("sqlite://{}", data.join("herald.db").display()),
    }
}

on_each_backend!(
    sigkill_after_a_correction_joined_answers_both_once_sqlite,
    sigkill_after_a_correction_joined_answers_both_once_postgres,
    sigkill_after_a_correction_joined_answers_both_once
);

async fn sigkill_after_a_correction_joined_answers_both_once(db: Db) {
    let (tg, llm, data) = fakes().await;
    // The first call is cancelled by the correction; the second (covering both) is killed.
    for _ in 0..2 {
        llm.push(Step::Delay(
            Duration::from_secs(30),
            Box::new(Step::Reply("never sent".into())),
        ));
    }
    let mut first = spawn_daemon(data.path(), &db, &llm, &tg.url());
    tg.push_private_text(USER, USER, "change the config");
    wait_until("the first model call", Duration::from_secs(30), || async {
        llm.request_count() >= 1
    })
    .await;
    tg.push_private_text(USER, USER, CORRECTION);
    wait_until(
        "the call that holds the correction",
        Duration::from_secs(30),
        || async { llm.request_count() >= 2 },
    )
    .await;
    assert_eq!(
        text_of(llm.requests()[1].messages().last().unwrap()),
        CORRECTION
    );
    first.kill();

    let mut second = spawn_daemon(data.path(), &db, &llm, &tg.url());
    tg.wait_for_sent(1, Duration::from_secs(40)).await;
    let store = herald::store::connect(&store_url(data.path(), &db), 2)
        .await
        .expect("open the daemon's store");
    quiet(&*store).await;
    let texts: Vec<String> = tg.sent_messages().into_iter().map(|m| m.text).collect();
    assert_eq!(texts.len(), 1, "one answer: {texts:?}");
    assert!(texts[0].starts_with("reply to: don"), "{texts:?}");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 3, "the retried turn made one call");
    let retried = reqs[2].messages();
    let n = retried.len();
    assert_eq!(text_of(&retried[n - 2]), "change the config");
    assert_eq!(text_of(&retried[n - 1]), CORRECTION);
    let (a, b) = (
        store.inbox_get(1).await.unwrap().unwrap(),
        store.inbox_get(2).await.unwrap().unwrap(),
    );
    assert_eq!((a.status, b.status), (InboxStatus::Done, InboxStatus::Done));
    assert_eq!(a.reply_message_id, b.reply_message_id);
    assert!(a.reply_message_id.is_some());
    second.kill();
}
