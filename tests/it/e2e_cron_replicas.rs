//! The daemon's own scheduler on the real clock: a fire cut by a restart runs once and is
//! marked `retried`; two daemons on one store (a SQLite file, or Postgres when `DATABASE_URL`
//! is set) run each scheduled time once.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use chrono::Utc;
use futures::FutureExt;
use herald::app::App;
use herald::config::{Config, Secret};
use herald::cron::JobSpec;
use herald::store::{CronFire, FireStatus, Store};
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, wait_for};
use sqlx::{Connection, Executor};

fn config_with(llm: &FakeLlm, data: &tempfile::TempDir, schedule: &str) -> Config {
    let mut c = test_config(llm, data);
    c.server.shutdown_grace_secs = 1;
    c.cron.jobs = vec![JobSpec {
        name: "brief".into(),
        schedule: schedule.into(),
        prompt: "Write the brief.".into(),
        deliver: vec!["web:alice".into()],
        timezone: None,
        catch_up: None,
        enabled: true,
        budget: None,
    }];
    c
}

/// How long a cron run may take to show up here.
const WAIT: Duration = Duration::from_secs(20);

async fn fires(store: &dyn Store) -> Vec<CronFire> {
    let mut f = store.cron_fires(Some("brief"), 1000).await.unwrap();
    f.reverse();
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_cut_by_a_restart_runs_once_and_is_marked_retried() {
    init();
    let llm = FakeLlm::start().await;
    llm.set_sticky(Some(Step::Hang));
    let data = tempfile::tempdir().unwrap();
    let at = (Utc::now() + chrono::TimeDelta::seconds(3)).to_rfc3339();
    let config = config_with(&llm, &data, &at);

    let first = App::start(config.clone()).await.unwrap();
    wait_for("the model call", WAIT, async || {
        (llm.request_count() >= 1).then_some(())
    })
    .await;
    first.shutdown().await; // the model still hangs: the turn is cut
    llm.set_sticky(None);

    let second = App::start(config).await.unwrap();
    let store = second.store.clone();
    let done = wait_for("the fire to finish", WAIT, async || {
        let f = fires(store.as_ref()).await;
        (f.len() == 1 && f[0].status != FireStatus::Claimed).then_some(f)
    })
    .await;
    let fire = &done[0];
    assert_eq!(fire.status, FireStatus::Retried, "{fire:?}");
    assert_eq!(fire.attempts, 2);
    assert_eq!(fire.deliveries, 1);
    assert_eq!(
        fire.note.as_deref(),
        Some("attempt 2; delivered to web:alice")
    );
    let outbox = store
        .outbox_for_inbox(fire.inbox_id.unwrap())
        .await
        .unwrap();
    assert_eq!(outbox.len(), 1, "one delivery: {outbox:?}");
    assert_eq!(outbox[0].text, "reply to: Write the brief.");
    assert_eq!(llm.request_count(), 2, "the cut call and the retry");
    // A restart later still does not run the one-shot again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(fires(store.as_ref()).await.len(), 1);
    second.shutdown().await;
}

/// Two daemons on one store, a job every second: after a few seconds every ledger run is
/// exactly one model call and one delivery.
async fn two_daemons_fire_each_time_once(configure: impl Fn(&mut Config)) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = config_with(&llm, &data, "every 1s");
    configure(&mut config);
    let mut second = config.clone();
    second.server.replica_id = Some("replica-b".into());
    config.server.replica_id = Some("replica-a".into());
    let a = App::start(config).await.unwrap();
    let b = App::start(second).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    a.store.cron_job_set_paused("brief", true, 0).await.unwrap();
    // Let the last claims of both schedulers land, then wait for their runs to finish.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let store = a.store.clone();
    let all = wait_for("every run to finish", WAIT, async || {
        let f = fires(store.as_ref()).await;
        f.iter()
            .all(|f| f.status != FireStatus::Claimed)
            .then_some(f)
    })
    .await;
    let runs: Vec<&CronFire> = all.iter().filter(|f| f.inbox_id.is_some()).collect();
    assert!(runs.len() >= 2, "the job fired too rarely: {all:?}");
    assert!(runs.iter().all(|f| f.status == FireStatus::Ok), "{runs:?}");
    assert_eq!(llm.request_count(), runs.len(), "one model call per fire");
    let mut delivered = 0;
    for f in &runs {
        delivered += store
            .outbox_for_inbox(f.inbox_id.unwrap())
            .await
            .unwrap()
            .len();
    }
    assert_eq!(delivered, runs.len(), "one delivery per fire");
    let holders: Vec<&str> = runs
        .iter()
        .filter_map(|f| f.claimed_by.as_deref())
        .collect();
    println!("{} fires, claimed by {holders:?}", runs.len());
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_on_one_sqlite_file_fire_each_time_once() {
    // test_config puts both on <data>/herald.db: the same file.
    two_daemons_fire_each_time_once(|_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_on_one_postgres_fire_each_time_once() {
    let Ok(admin_url) = std::env::var("DATABASE_URL") else {
        herald_test_support::skip_or_fail("postgres: DATABASE_URL not set");
        return;
    };
    let schema = format!("herald_cron_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
    admin
        .execute(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .await
        .unwrap();
    let sep = if admin_url.contains('?') { '&' } else { '?' };
    let url = format!("{admin_url}{sep}options[search_path]={schema}");
    let outcome = AssertUnwindSafe(two_daemons_fire_each_time_once(move |c| {
        c.store.url = Some(Secret::new(url.clone()));
    }))
    .catch_unwind()
    .await;
    admin
        .execute(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .await
        .unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
