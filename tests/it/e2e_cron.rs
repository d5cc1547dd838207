//! Scheduled runs through the real core, with the scheduler's clock injected: catch-up after
//! downtime, `[SILENT]`, two schedulers racing for one fire, and the `herald cron` commands.
//! The App's own scheduler is off here; each test drives a `Scheduler` pass by pass.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use herald::app::App;
use herald::cli::cron::{execute, CronCmd};
use herald::cron::{JobSpec, Scheduler};
use herald::store::{CronFire, FireStatus};
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, wait_for};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 6, 0, 0).unwrap()
}

fn job(name: &str, schedule: &str, deliver: &[&str], catch_up: Option<&str>) -> JobSpec {
    JobSpec {
        name: name.into(),
        schedule: schedule.into(),
        prompt: format!("Write the {name} brief."),
        deliver: deliver.iter().map(|s| s.to_string()).collect(),
        timezone: None,
        catch_up: catch_up.map(Into::into),
        enabled: true,
        budget: None,
    }
}

/// An App without its own scheduler, and a scheduler whose clock the test sets.
async fn start(
    llm: &FakeLlm,
    data: &tempfile::TempDir,
) -> (App, Arc<Mutex<DateTime<Utc>>>, Scheduler) {
    let mut config = test_config(llm, data);
    config.cron.enabled = false;
    let app = App::start(config).await.unwrap();
    let now = Arc::new(Mutex::new(t0()));
    let clock = now.clone();
    let sched = app
        .scheduler("test/cron")
        .with_clock(Arc::new(move || *clock.lock().unwrap()));
    (app, now, sched)
}

/// Passes until the job has no claimed fire left; returns its ledger, oldest first.
async fn settle(app: &App, sched: &Scheduler, job: &str) -> Vec<CronFire> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        sched.tick().await.unwrap();
        let mut fires = app.store.cron_fires(Some(job), 100).await.unwrap();
        if fires.iter().all(|f| f.status != FireStatus::Claimed) {
            fires.reverse();
            return fires;
        }
        assert!(Instant::now() < deadline, "fires never finished: {fires:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn three_missed_fires_run_once_under_once_and_never_under_skip() {
    init();
    for policy in ["once", "skip"] {
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().unwrap();
        let (app, now, sched) = start(&llm, &data).await;
        let spec = job("hourly", "every 1h", &["web:alice"], Some(policy));
        app.store
            .cron_job_add(&spec, t0().timestamp_millis())
            .await
            .unwrap();
        // Down from before the first fire until ten minutes after the third.
        *now.lock().unwrap() = t0() + TimeDelta::minutes(190);
        let pass = sched.tick().await.unwrap();
        let fires = settle(&app, &sched, "hourly").await;
        let hours: Vec<i64> = fires
            .iter()
            .map(|f| (f.scheduled_at - t0().timestamp_millis()) / 3_600_000)
            .collect();
        if policy == "once" {
            assert_eq!(pass.started, 1);
            assert_eq!(hours, [3], "one run, for the newest missed time");
            assert_eq!(fires[0].status, FireStatus::Ok);
            assert_eq!(fires[0].missed_count, 3);
            assert_eq!(fires[0].deliveries, 1);
            assert_eq!(llm.request_count(), 1);
        } else {
            assert_eq!((pass.started, pass.skipped), (0, 3));
            assert_eq!(hours, [1, 2, 3]);
            assert!(fires.iter().all(|f| f.status == FireStatus::Skipped));
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(llm.request_count(), 0, "skip ran a missed fire");
            // The next fire that comes on time runs as usual.
            *now.lock().unwrap() = t0() + TimeDelta::hours(4) + TimeDelta::seconds(5);
            let fires = settle(&app, &sched, "hourly").await;
            assert_eq!(fires.len(), 4);
            assert_eq!(fires[3].status, FireStatus::Ok);
            assert_eq!(fires[3].missed_count, 0);
            assert_eq!(llm.request_count(), 1);
        }
        app.shutdown().await;
    }
}

#[tokio::test]
async fn a_silent_reply_delivers_nothing_and_the_ledger_says_silent() {
    init();
    let llm = FakeLlm::start().await;
    llm.push(Step::Reply("[SILENT]".into()));
    let data = tempfile::tempdir().unwrap();
    let (app, now, sched) = start(&llm, &data).await;
    let spec = job("check", "every 1h", &["web:alice", "web:bob"], None);
    app.store
        .cron_job_add(&spec, t0().timestamp_millis())
        .await
        .unwrap();
    *now.lock().unwrap() = t0() + TimeDelta::hours(1) + TimeDelta::seconds(2);
    let fires = settle(&app, &sched, "check").await;
    assert_eq!(fires.len(), 1);
    assert_eq!(fires[0].status, FireStatus::Silent);
    assert_eq!(fires[0].deliveries, 0);
    let inbox = fires[0].inbox_id.unwrap();
    assert!(app.store.outbox_for_inbox(inbox).await.unwrap().is_empty());
    assert_eq!(llm.request_count(), 1);
    app.shutdown().await;
}

#[tokio::test]
async fn two_schedulers_racing_on_one_store_claim_each_fire_once() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let (app, now, a) = start(&llm, &data).await;
    let clock = now.clone();
    let b = app
        .scheduler("other/cron")
        .with_clock(Arc::new(move || *clock.lock().unwrap()));
    for name in ["j1", "j2", "j3"] {
        let spec = job(name, "every 1m", &["web:alice"], None);
        app.store
            .cron_job_add(&spec, t0().timestamp_millis())
            .await
            .unwrap();
    }
    let mut started = 0;
    for minute in 1..=4 {
        *now.lock().unwrap() = t0() + TimeDelta::minutes(minute) + TimeDelta::milliseconds(300);
        let (pa, pb) = tokio::join!(a.tick(), b.tick());
        started += pa.unwrap().started + pb.unwrap().started;
    }
    assert_eq!(started, 3 * 4, "each job's fire claimed once per minute");
    for name in ["j1", "j2", "j3"] {
        let fires = settle(&app, &a, name).await;
        assert_eq!(fires.len(), 4);
        assert!(
            fires.iter().all(|f| f.status == FireStatus::Ok),
            "{fires:?}"
        );
    }
    assert_eq!(llm.request_count(), 12);
    app.shutdown().await;
}

#[tokio::test]
async fn cron_commands_check_targets_and_manage_jobs() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.cron.enabled = false;
    let app = App::start(config.clone()).await.unwrap();
    let store = app.store.as_ref();
    let add = |deliver: &str| CronCmd::Add {
        name: "brief".into(),
        schedule: "0 7 * * 1-5".into(),
        prompt: "Morning brief.".into(),
        deliver: vec![deliver.into()],
        timezone: Some("Europe/Berlin".into()),
        catch_up: None,
        budget: None,
    };
    let err = execute(store, &config, add("irc:C123"), t0())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot add the job (--deliver): cron job \"brief\": unknown platform \"irc\" in delivery \
             target \"irc:C123\" (known: {})",
            known_targets()
        )
    );
    let err = execute(store, &config, add("telegram:42"), t0())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("needs the telegram adapter, which is not configured"),
        "{err}"
    );
    assert_eq!(
        execute(store, &config, CronCmd::List, t0()).await.unwrap(),
        "no cron jobs\n"
    );

    execute(store, &config, add("web:alice"), t0())
        .await
        .unwrap();
    let list = execute(store, &config, CronCmd::List, t0()).await.unwrap();
    assert_eq!(
        list,
        "brief  schedule \"0 7 * * 1-5\" (Europe/Berlin)  deliver web:alice  payer system  \
         active (cli)  last never  next 2026-03-03T06:00:00Z\n"
    );
    let dup = execute(store, &config, add("web:alice"), t0())
        .await
        .unwrap_err();
    assert!(dup.to_string().contains("already exists"), "{dup}");
    execute(
        store,
        &config,
        CronCmd::Pause {
            name: "brief".into(),
        },
        t0(),
    )
    .await
    .unwrap();
    let list = execute(store, &config, CronCmd::List, t0()).await.unwrap();
    assert!(list.contains("paused (cli)"), "{list}");

    // A manual run fires even while paused, and the daemon runs it.
    execute(
        store,
        &config,
        CronCmd::Run {
            name: "brief".into(),
        },
        Utc::now(),
    )
    .await
    .unwrap();
    let fire = wait_for("the manual run", Duration::from_secs(15), async || {
        let f = store.cron_fires(Some("brief"), 1).await.unwrap().remove(0);
        let inbox = store.inbox_get(f.inbox_id.unwrap()).await.unwrap().unwrap();
        (inbox.status != herald::store::InboxStatus::Pending).then_some(f)
    })
    .await;
    assert!(fire.manual);
    assert_eq!(llm.request_count(), 1);
    // The operator looks right away: the log shows the run's outcome, not the `claimed` the
    // ledger row keeps until a scheduler pass records it.
    let log = execute(
        store,
        &config,
        CronCmd::Log {
            name: Some("brief".into()),
            limit: 1,
        },
        Utc::now(),
    )
    .await
    .unwrap();
    assert!(
        log.contains(" (manual)  ok  ") && log.contains("delivered to web:alice"),
        "{log}"
    );

    let gone = execute(
        store,
        &config,
        CronCmd::Remove {
            name: "nope".into(),
        },
        t0(),
    )
    .await;
    assert!(gone
        .unwrap_err()
        .to_string()
        .contains("no cron job named \"nope\""));
    execute(
        store,
        &config,
        CronCmd::Remove {
            name: "brief".into(),
        },
        t0(),
    )
    .await
    .unwrap();
    assert_eq!(
        execute(store, &config, CronCmd::List, t0()).await.unwrap(),
        "no cron jobs\n"
    );
    app.shutdown().await;
}

#[test]
fn the_binary_rejects_an_unknown_target_at_add_time() {
    let data = tempfile::tempdir().unwrap();
    let out = herald_test_support::herald::Herald::new()
        .env("RUST_LOG", "error")
        .args(["--data-dir", data.path().to_str().unwrap(), "cron", "add"])
        .args(["--name", "brief", "--schedule", "every 1h", "--prompt", "p"])
        .args(["--deliver", "web:alice", "--deliver", "irc:#general"])
        .output();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("unknown platform \"irc\" in delivery target \"irc:#general\""),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_claim_whose_scheduler_died_before_queuing_is_taken_over_once() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let (app, now, sched) = start(&llm, &data).await;
    let spec = job("orphan", "every 1h", &["web:alice"], None);
    app.store
        .cron_job_add(&spec, t0().timestamp_millis())
        .await
        .unwrap();
    // Another scheduler claimed the 07:00 fire and died before writing its inbox event.
    let at = t0() + TimeDelta::hours(1);
    let claim = herald::store::NewFire {
        job: "orphan".into(),
        scheduled_at: at.timestamp_millis(),
        manual: false,
        holder: "dead/cron".into(),
        claim_until: (at + TimeDelta::seconds(30)).timestamp_millis(),
        missed_count: 0,
        note: None,
    };
    app.store.cron_fire_claim(&claim).await.unwrap().unwrap();
    // Before the claim expires nobody touches it; after, one pass queues it.
    *now.lock().unwrap() = at + TimeDelta::seconds(10);
    assert_eq!(sched.tick().await.unwrap().started, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(llm.request_count(), 0);
    *now.lock().unwrap() = at + TimeDelta::seconds(40);
    let fires = settle(&app, &sched, "orphan").await;
    assert_eq!(fires.len(), 1);
    assert_eq!(fires[0].status, FireStatus::Retried);
    assert_eq!(fires[0].attempts, 2);
    assert_eq!(fires[0].claimed_by.as_deref(), Some("test/cron"));
    assert_eq!(llm.request_count(), 1);
    app.shutdown().await;
}

/// The platforms a delivery target may name in this build, as the error lists them.
fn known_targets() -> String {
    let mut names: Vec<&str> = herald::PLATFORMS
        .iter()
        .filter(|s| s.target.is_some())
        .map(|s| s.name.as_str())
        .collect();
    names.sort_unstable();
    names.join(", ")
}
