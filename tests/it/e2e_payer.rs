//! Issue 52, part 3: spend has a payer, always. Every kind of model call Herald makes writes a
//! ledger row naming a person or `system`; a cron job made in a chat is billed to its maker and
//! stops at their `budget.person_daily`, with the reason in `herald cron log`.
//!
//! The kinds the issue lists that make no model call in Herald: compaction (deterministic, it
//! quotes), titles, summaries other than the handoff capsule, "background calls" and hooks
//! (the memory hook posts to its own server; no hook calls the model).
//!
//! Prices as in `e2e_budget`: a call bills 8 output tokens at 1,000 per million (0.008) and,
//! with `llm.max_tokens = 100`, holds 0.1 while it runs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use herald::app::App;
use herald::cli::cron::{execute, CronCmd};
use herald::config::{Config, PriceConfig};
use herald::cron::{JobSpec, Scheduler};
use herald::domain::{LaneKey, Payer};
use herald::handoff::PassKind;
use herald::store::{FireStatus, SpendScope};
use herald_test_support::db::Db;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, wait_for, wait_until, Client};
use herald_test_support::on_each_backend;
use tokio_util::sync::CancellationToken;

const BILL: i64 = 8_000_000;

const CAPSULE: &str = "## Working on\nMoving the photo backups to the new disk.\n\n\
## State\nHalf of the albums are copied; checksums match so far.\n\n\
## Decisions\nKeep the old disk read-only until every checksum matches.\n\n\
## Pointers\nThe copy script is backup.sh.\n\n\
## Next\nCopy the remaining albums and compare checksums.\n";

fn priced(config: &mut Config) {
    config.llm.max_tokens = 100;
    config.budget.prices = vec![PriceConfig {
        model: "fake-*".into(),
        input: Some(0.0),
        output: Some(1000.0),
        cache_read: Some(0.0),
        cache_write: Some(0.0),
    }];
}

/// The daemon, and the config it runs with (for the CLI's commands).
async fn start(
    db: &Db,
    llm: &FakeLlm,
    data: &tempfile::TempDir,
    f: impl Fn(&mut Config),
) -> (App, Config) {
    init();
    let mut config = test_config(llm, data);
    config.cron.enabled = false;
    config.handoff.nightly = String::new();
    // The job is created without a question: this is about who pays for it.
    config.tools.require_approval = Vec::new();
    priced(&mut config);
    f(&mut config);
    db.apply(&mut config);
    (App::start(config.clone()).await.unwrap(), config)
}

async fn say(client: &Client, lane: &str, sender: &str, text: &str) -> String {
    let (status, body) = client
        .chat_body(serde_json::json!({"lane": lane, "text": text, "sender": sender}))
        .await;
    assert_eq!(status, 200, "{body}");
    body["reply"].as_str().unwrap_or_default().to_string()
}

/// A scheduler on a clock the test moves.
fn scheduler(app: &App, at: DateTime<Utc>) -> (Scheduler, Arc<Mutex<DateTime<Utc>>>) {
    let now = Arc::new(Mutex::new(at));
    let clock = now.clone();
    let sched = app
        .scheduler("test/cron")
        .with_clock(Arc::new(move || *clock.lock().unwrap()));
    (sched, now)
}

/// Scheduler passes until `job` has `n` fires and none is still claimed; newest first.
async fn fires(app: &App, sched: &Scheduler, job: &str, n: usize) -> Vec<herald::store::CronFire> {
    wait_for("the fire to finish", Duration::from_secs(20), async || {
        sched.tick().await.unwrap();
        let fires = app.store.cron_fires(Some(job), 10).await.unwrap();
        (fires.len() == n && fires.iter().all(|f| f.status != FireStatus::Claimed)).then_some(fires)
    })
    .await
}

/// Each settled row as (lane, cause, job, payer).
async fn ledger(app: &App) -> Vec<(String, String, Option<String>, Option<Payer>)> {
    app.store
        .spend_rows(0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.lane.clone(), r.cause.clone(), r.job.clone(), r.payer()))
        .collect()
}

fn job(name: &str, lane: &str) -> JobSpec {
    JobSpec {
        name: name.into(),
        schedule: "every 1h".into(),
        prompt: format!("Write the {name} brief."),
        deliver: vec![lane.into()],
        timezone: None,
        catch_up: None,
        enabled: true,
        budget: None,
    }
}

/// Turn, helper agent, handoff capsule, nightly capsule, and a run of each kind of cron job:
/// each row of the ledger names who pays, and nothing is billed to nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_model_call_names_its_payer() {
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let (app, _) = start(&Db::Sqlite, &llm, &data, |_| {}).await;
    let client = Client::new(&app);
    let ann = || Some(Payer::Person("web-ann".into()));
    let row = |lane: &str, cause: &str, job: Option<&str>, payer: Option<Payer>| {
        (
            lane.to_string(),
            cause.to_string(),
            job.map(str::to_string),
            payer,
        )
    };

    // A turn, and a turn whose helper agent calls the model too.
    assert_eq!(
        say(&client, "web:ann", "ann", "hello").await,
        "reply to: hello"
    );
    let (ask, goal) = ("look into the outage", "read the outage notes");
    llm.push_when(
        ask,
        Step::ToolCall(
            "delegate".into(),
            serde_json::json!({ "goal": goal }).to_string(),
        ),
    );
    llm.push_when(goal, Step::Reply("The disk filled up.".into()));
    llm.push_when(
        ask,
        Step::Reply("The disk filled up, says my helper.".into()),
    );
    say(&client, "web:ann", "ann", ask).await;
    assert_eq!(
        ledger(&app).await,
        [
            row("web:ann", "turn", None, ann()),
            row("web:ann", "turn", None, ann()),
            row("web:ann", "child", None, ann()),
            row("web:ann", "turn", None, ann()),
        ]
    );

    // A handoff capsule the person asked for is theirs.
    say(&client, "web:ann", "ann", "the checksums match so far").await;
    llm.push(Step::Reply(CAPSULE.into()));
    let lane = LaneKey::new("web:ann");
    let session = app.store.session_current(&lane).await.unwrap().unwrap().id;
    say(&client, "web:ann", "ann", "handoff").await;
    wait_until(
        "the capsule's session closed",
        Duration::from_secs(20),
        || async {
            let s = app.store.session_get(&session).await.unwrap().unwrap();
            s.ended_at.is_some()
        },
    )
    .await;
    assert_eq!(
        ledger(&app).await[5],
        row("web:ann", "capsule", None, ann())
    );

    // The nightly closer's capsule of an idle conversation is Herald's own work.
    for text in ["one", "two", "three"] {
        say(&client, "web:bob", "bob", text).await;
    }
    llm.push(Step::Reply(CAPSULE.into()));
    let night = Utc::now() + TimeDelta::hours(2);
    let report = app
        .nightly
        .pass(night, PassKind::Scheduled(night), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(report.builds, [("web:bob".to_string(), "ok".to_string())]);
    let rows = ledger(&app).await;
    assert_eq!(rows.len(), 10, "{rows:?}");
    assert_eq!(
        rows[9],
        row("web:bob", "capsule", None, Some(Payer::System))
    );

    // A job the operator added runs on the system; one made in Ann's chat runs on Ann.
    let t0 = Utc::now();
    app.store
        .cron_job_add(&job("ops", "web:ops"), t0.timestamp_millis())
        .await
        .unwrap();
    app.store
        .cron_job_add_owned(
            &job("web_ann.mine", "web:ann"),
            &LaneKey::new("web:ann"),
            "web:ann",
            t0.timestamp_millis(),
        )
        .await
        .unwrap();
    let (sched, now) = scheduler(&app, t0);
    *now.lock().unwrap() = t0 + TimeDelta::minutes(61);
    assert_eq!(
        fires(&app, &sched, "ops", 1).await[0].status,
        FireStatus::Ok
    );
    let mine = fires(&app, &sched, "web_ann.mine", 1).await;
    assert_eq!(mine[0].status, FireStatus::Ok, "{mine:?}");
    let mut runs: Vec<_> = ledger(&app).await.split_off(10);
    runs.sort_by(|a, b| a.2.cmp(&b.2));
    assert_eq!(
        runs,
        [
            row("cron:ops", "turn", Some("ops"), Some(Payer::System)),
            row("cron:web_ann.mine", "turn", Some("web_ann.mine"), ann()),
        ]
    );
    // `herald usage --by person` reads the payers back.
    let by = herald::budget::report::group(
        &app.store.spend_rows(0).await.unwrap(),
        herald::budget::report::By::Person,
    );
    let keys: Vec<_> = by.iter().map(|g| (g.key.clone(), g.calls)).collect();
    assert_eq!(
        keys,
        [
            (Some("system".into()), 2),
            (Some("web-ann".into()), 7),
            (Some("web-bob".into()), 3),
        ]
    );
    app.shutdown().await;
}

/// Ann makes a job in her chat; its first run is billed to her; once her day's cap is spent
/// its next run is refused before the model, `herald cron log` says why, and nothing more is
/// spent or delivered.
async fn a_chat_made_cron_job_stops_at_its_makers_daily_cap(db: Db) {
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    // 0.13: a call passes while at most 0.03 is spent (a call holds 0.1): four calls run.
    let (app, config) = start(&db, &llm, &data, |c| c.budget.person_daily = Some(0.13)).await;
    let client = Client::new(&app);
    let t0 = Utc::now();
    let ask = "say hi every hour";
    llm.push_when(
        ask,
        Step::ToolCall(
            "cron".into(),
            serde_json::json!({"action": "create", "name": "hi", "schedule": "every 1h",
                "prompt": "Say hi to Ann."})
            .to_string(),
        ),
    );
    llm.push_when(ask, Step::Reply("Scheduled.".into()));
    assert_eq!(say(&client, "web:ann", "ann", ask).await, "Scheduled.");
    let jobs = app.store.cron_jobs().await.unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let name = jobs[0].name.clone();
    let listed = execute(app.store.as_ref(), &config, CronCmd::List, t0)
        .await
        .unwrap();
    assert!(listed.contains("payer web-ann"), "{listed}");

    // The first run: billed to Ann, delivered to her chat.
    let (sched, now) = scheduler(&app, t0);
    *now.lock().unwrap() = t0 + TimeDelta::minutes(61);
    assert_eq!(
        fires(&app, &sched, &name, 1).await[0].status,
        FireStatus::Ok
    );
    let day = Utc::now().format("%Y-%m-%d").to_string();
    let ann = SpendScope::PersonDay {
        person: "web-ann".into(),
        day,
    };
    assert_eq!(app.store.spend_sum(&ann).await.unwrap(), 3 * BILL);

    // Ann's own question takes her day to 0.032: no call fits under 0.13 any more.
    assert_eq!(
        say(&client, "web:ann", "ann", "one more").await,
        "reply to: one more"
    );
    let calls = llm.request_count();
    assert_eq!(calls, 4);

    *now.lock().unwrap() = t0 + TimeDelta::minutes(121);
    let fired = fires(&app, &sched, &name, 2).await;
    assert_eq!(fired[0].status, FireStatus::Skipped, "{fired:?}");
    let log = execute(
        app.store.as_ref(),
        &config,
        CronCmd::Log {
            name: Some(name.clone()),
            limit: 1,
        },
        Utc::now(),
    )
    .await
    .unwrap();
    assert!(
        log.contains("skipped")
            && log.contains(
                "over budget: This scheduled run is paid by web-ann, who has reached their \
                 daily budget (0.03 USD of 0.13 USD spent today); skipped."
            ),
        "{log}"
    );
    assert_eq!(
        llm.request_count(),
        calls,
        "the refused run reached the model"
    );
    assert_eq!(app.store.spend_sum(&ann).await.unwrap(), 4 * BILL);
    let delivered = app
        .store
        .outbox_recent(200)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.lane == "web:ann" && r.text.contains("Say hi to Ann"))
        .count();
    assert_eq!(delivered, 1, "only the first run was delivered");
    app.shutdown().await;
}

on_each_backend!(
    sqlite_chat_job_stops_at_makers_cap,
    postgres_chat_job_stops_at_makers_cap,
    a_chat_made_cron_job_stops_at_its_makers_daily_cap
);

/// Carol, let in by pairing, made a job in her chat and was revoked: the job's runs are still
/// hers to pay. Her day is spent, so the operator's `herald cron run` of it is refused before
/// the model, and `herald cron log` says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_makers_cap_holds_after_their_access_is_removed() {
    use herald::store::{Billed, NewHold, PairingAsk};
    use herald_test_support::fake_telegram::FakeTelegram;
    use herald_test_support::telegram::{fakes, tg_config};

    const CAROL: i64 = 3003;
    let (tg, llm, data): (FakeTelegram, FakeLlm, _) = fakes().await;
    let mut config = tg_config(&tg, &llm, &data);
    config.cron.enabled = false;
    priced(&mut config);
    config.budget.person_daily = Some(0.13);
    let app = App::start(config.clone()).await.unwrap();
    let carol = CAROL.to_string();
    app.store
        .pairing_request(&PairingAsk {
            platform: "telegram",
            sender_id: &carol,
            sender_name: "carol",
            chat_id: &carol,
            new_code: "PAIR3003",
            ttl_ms: 3_600_000,
            remind_every_ms: 3_600_000,
            max_pending: 20,
        })
        .await
        .unwrap();
    app.store
        .pairing_approve("telegram", "PAIR3003")
        .await
        .unwrap();
    let lane = LaneKey::new(&format!("telegram:{CAROL}"));
    let name = format!("telegram_{CAROL}.hello");
    app.store
        .cron_job_add_owned(
            &job(&name, lane.as_str()),
            &lane,
            &format!("telegram:{CAROL}"),
            Utc::now().timestamp_millis(),
        )
        .await
        .unwrap();
    assert!(app.store.sender_revoke("telegram", &carol).await.unwrap());
    let listed = execute(app.store.as_ref(), &config, CronCmd::List, Utc::now())
        .await
        .unwrap();
    assert!(listed.contains("payer telegram-3003"), "{listed}");

    // What Carol spent today in her chat before she was revoked: 0.032, so no call fits.
    let now = Utc::now();
    let earlier = NewHold {
        lane: lane.to_string(),
        agent: "default".into(),
        payer: Payer::Person("telegram-3003".into()),
        job: None,
        run: None,
        cause: "turn".into(),
        model: "fake-model".into(),
        day: now.format("%Y-%m-%d").to_string(),
        month: now.format("%Y-%m").to_string(),
        held: 0,
        expires_at: 0,
    };
    app.store
        .spend_record(&earlier, Some(4 * BILL), Billed::default())
        .await
        .unwrap();

    let run = CronCmd::Run { name: name.clone() };
    execute(app.store.as_ref(), &config, run, Utc::now())
        .await
        .unwrap();
    let log = wait_for(
        "the manual run's outcome",
        Duration::from_secs(20),
        async || {
            let log = execute(
                app.store.as_ref(),
                &config,
                CronCmd::Log {
                    name: Some(name.clone()),
                    limit: 1,
                },
                Utc::now(),
            )
            .await
            .unwrap();
            (!log.contains("claimed")).then_some(log)
        },
    )
    .await;
    assert!(
        log.contains(" (manual)  skipped  ")
            && log.contains("paid by telegram-3003, who has reached their daily budget"),
        "{log}"
    );
    assert_eq!(llm.request_count(), 0, "the refused run reached the model");
    app.shutdown().await;
    tg.shutdown().await;
}
