//! Issue 31, budgets enforced: every model call is reserved at its worst case before it is sent
//! and settled to the fake model's bill after. A person over `person_daily` gets one line and
//! the model hears nothing more; another person is not held back; a cron run over its own cap is
//! skipped and the ledger says why; an unpriced model with caps on is refused; two replicas
//! racing one cap on one database never pass it.
//!
//! Prices are chosen so the sums are exact: the fake bills 120 prompt tokens (100 of them
//! cached) and 8 output tokens per call; only output is priced (1,000 per million), so a call
//! costs 0.008 and, with `llm.max_tokens = 100`, reserves 0.1.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use herald::app::App;
use herald::config::{Config, PriceConfig};
use herald::cron::{JobSpec, Scheduler};
use herald::domain::{Amount, Cap, LaneKey, Payer};
use herald::store::{CapLimit, FireStatus, NewHold, SpendScope, Store};
use herald_test_support::backends::in_fresh_pg_schema;
use herald_test_support::db::Db;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, test_config, Client};
use herald_test_support::on_each_backend;

/// A call's bill and its reservation, in billionths.
const BILL: i64 = 8_000_000;
const HOLD: i64 = 100_000_000;

fn priced(config: &mut Config, model: &str) {
    config.llm.max_tokens = 100;
    config.budget.prices = vec![PriceConfig {
        model: model.into(),
        input: Some(0.0),
        output: Some(1000.0),
        cache_read: Some(0.0),
        cache_write: Some(0.0),
    }];
}

async fn start(db: &Db, llm: &FakeLlm, data: &tempfile::TempDir, f: impl Fn(&mut Config)) -> App {
    init();
    let mut config = test_config(llm, data);
    config.cron.enabled = false;
    priced(&mut config, "fake-*");
    f(&mut config);
    db.apply(&mut config);
    App::start(config).await.unwrap()
}

async fn say(client: &Client, lane: &str, sender: &str, text: &str) -> String {
    let (status, body) = client
        .chat_body(serde_json::json!({"lane": lane, "text": text, "sender": sender}))
        .await;
    assert_eq!(status, 200, "{body}");
    body["reply"].as_str().unwrap_or_default().to_string()
}

async fn a_person_over_their_daily_cap_gets_one_line_and_the_model_nothing(db: Db) {
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    // 0.13: a call passes while at most 0.03 is spent, so four calls run and the fifth is
    // refused (0.032 spent + a 0.1 hold > 0.13).
    let app = start(&db, &llm, &data, |c| c.budget.person_daily = Some(0.13)).await;
    let client = Client::new(&app);
    for i in 1..=4 {
        let reply = say(&client, "web:ann", "ann", &format!("question {i}")).await;
        assert_eq!(reply, format!("reply to: question {i}"));
    }
    assert_eq!(llm.request_count(), 4);
    let refused = say(&client, "web:ann", "ann", "question 5").await;
    assert!(
        refused
            .starts_with("You have reached your daily budget (0.03 USD of 0.13 USD spent today)"),
        "{refused}"
    );
    assert!(refused.contains("It resets at "), "{refused}");
    assert_eq!(llm.request_count(), 4, "the model heard a refused turn");
    // Nothing half-done: the refused question is kept, no answer to it is.
    let transcript = client.transcript("web:ann").await;
    assert_eq!(transcript.last().unwrap().1, "question 5");
    // Another person's day is their own.
    assert_eq!(
        say(&client, "web:bob", "bob", "hello").await,
        "reply to: hello"
    );
    assert_eq!(llm.request_count(), 5);
    // Each turn's row carries what it billed and cost.
    let turns = app.store.turns(&LaneKey::new("web:ann"), 10).await.unwrap();
    let answered: Vec<_> = turns.iter().filter(|t| t.cost.is_some()).collect();
    assert_eq!(answered.len(), 4, "{turns:?}");
    for t in &answered {
        assert_eq!(t.cost, Some(BILL));
        assert_eq!(
            (t.billed.fresh_input, t.billed.cache_read, t.billed.output),
            (20, 100, 8)
        );
    }
    let ann = SpendScope::PersonDay {
        person: "web-ann".into(),
        day: Utc::now().format("%Y-%m-%d").to_string(),
    };
    assert_eq!(app.store.spend_sum(&ann).await.unwrap(), 4 * BILL);
    app.shutdown().await;
}

on_each_backend!(
    sqlite_person_daily_cap,
    postgres_person_daily_cap,
    a_person_over_their_daily_cap_gets_one_line_and_the_model_nothing
);

fn job(name: &str, budget: Option<f64>) -> JobSpec {
    JobSpec {
        name: name.into(),
        schedule: "every 1h".into(),
        prompt: format!("Write the {name} brief."),
        deliver: vec![format!("web:{name}-inbox")],
        timezone: None,
        catch_up: None,
        enabled: true,
        budget: budget.and_then(Amount::from_units),
    }
}

/// Scheduler passes until `job` has a fire and none is still claimed; its ledger, newest first.
async fn fires(app: &App, sched: &Scheduler, job: &str) -> Vec<herald::store::CronFire> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        sched.tick().await.unwrap();
        let fires = app.store.cron_fires(Some(job), 10).await.unwrap();
        if !fires.is_empty() && fires.iter().all(|f| f.status != FireStatus::Claimed) {
            return fires;
        }
        assert!(std::time::Instant::now() < deadline, "{fires:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_cron_run_over_its_cap_is_skipped_and_the_ledger_says_why(db: Db) {
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    // The default run cap lets a run through; the tight job's own cap is below one hold.
    let app = start(&db, &llm, &data, |c| c.budget.cron_run = Some(0.5)).await;
    let t0 = Utc.with_ymd_and_hms(2026, 3, 2, 6, 0, 0).unwrap();
    let now = Arc::new(std::sync::Mutex::new(t0));
    let clock = now.clone();
    let sched = app
        .scheduler("test/cron")
        .with_clock(Arc::new(move || *clock.lock().unwrap()));
    for spec in [job("tight", Some(0.05)), job("roomy", None)] {
        app.store
            .cron_job_add(&spec, t0.timestamp_millis())
            .await
            .unwrap();
    }
    *now.lock().unwrap() = t0 + chrono::TimeDelta::minutes(61);
    let tight = fires(&app, &sched, "tight").await;
    assert_eq!(tight[0].status, FireStatus::Skipped, "{tight:?}");
    let note = tight[0].note.clone().unwrap_or_default();
    assert!(
        note.contains("over budget") && note.contains("would pass its budget"),
        "{note}"
    );
    let roomy = fires(&app, &sched, "roomy").await;
    assert_eq!(roomy[0].status, FireStatus::Ok, "{roomy:?}");
    assert_eq!(
        llm.request_count(),
        1,
        "only the roomy run reached the model"
    );
    let client = Client::new(&app);
    assert!(client.transcript("web:tight-inbox").await.is_empty());
    // The next fire tries again (and is skipped again: its cap has not changed).
    *now.lock().unwrap() = t0 + chrono::TimeDelta::minutes(121);
    let tight = fires(&app, &sched, "tight").await;
    assert_eq!(tight.len(), 2, "{tight:?}");
    assert!(tight.iter().all(|f| f.status == FireStatus::Skipped));
    app.shutdown().await;
}

on_each_backend!(
    sqlite_cron_run_cap,
    postgres_cron_run_cap,
    a_cron_run_over_its_cap_is_skipped_and_the_ledger_says_why
);

#[tokio::test]
async fn an_unpriced_model_is_refused_while_caps_are_on() {
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = start(&Db::Sqlite, &llm, &data, |c| {
        priced(c, "gpt-4o*");
        c.budget.daily = Some(5.0);
    })
    .await;
    let client = Client::new(&app);
    let reply = say(&client, "web:cat", "cat", "hi").await;
    assert!(
        reply.starts_with("The model fake-model has no price in [[budget.prices]]"),
        "{reply}"
    );
    assert_eq!(llm.request_count(), 0);
    app.shutdown().await;
}

/// Two stores on one database (two replicas), ten reservations each at once, under a cap that
/// fits exactly ten: ten pass, the cap is never passed.
async fn race(one: Arc<dyn Store>, two: Arc<dyn Store>) {
    let day = "2026-12-02".to_string();
    let cap = CapLimit {
        cap: Cap::Daily,
        period: day.clone(),
        scope: SpendScope::Day(day.clone()),
        limit: 10 * HOLD,
    };
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20 {
        let store = if i % 2 == 0 { one.clone() } else { two.clone() };
        let (cap, day) = (cap.clone(), day.clone());
        tasks.spawn(async move {
            let hold = NewHold {
                lane: format!("web:r{i}"),
                agent: "default".into(),
                payer: Payer::Person(format!("r{i}")),
                job: None,
                run: None,
                cause: "turn".into(),
                model: "fake-model".into(),
                day,
                month: "2026-12".into(),
                held: HOLD,
                expires_at: i64::MAX,
            };
            store
                .spend_reserve(&hold, &[cap])
                .await
                .unwrap()
                .map(|r| r.id)
        });
    }
    let mut passed = 0;
    while let Some(r) = tasks.join_next().await {
        match r.unwrap() {
            Ok(_) => passed += 1,
            Err(hit) => assert!(hit.spent + HOLD > hit.limit, "{hit:?}"),
        }
    }
    assert_eq!(passed, 10);
    let spent = one.spend_sum(&SpendScope::Day(day)).await.unwrap();
    assert_eq!(spent, 10 * HOLD, "the cap was passed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_racing_one_cap_on_sqlite_never_pass_it() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    let one = herald::store::connect(&url, 4).await.unwrap();
    one.migrate().await.unwrap();
    let two = herald::store::connect(&url, 4).await.unwrap();
    race(one, two).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_racing_one_cap_on_postgres_never_pass_it() {
    use futures::FutureExt;
    in_fresh_pg_schema("herald_budget", |url| {
        std::panic::AssertUnwindSafe(async move {
            let one = herald::store::connect(&url, 8).await.unwrap();
            one.migrate().await.unwrap();
            let two = herald::store::connect(&url, 8).await.unwrap();
            race(one, two).await;
        })
        .catch_unwind()
    })
    .await;
}

/// Without caps nothing is held, and each call is still written once, priced, when billed.
#[tokio::test]
async fn without_caps_each_call_is_recorded_once_with_its_price() {
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = start(&Db::Sqlite, &llm, &data, |_| {}).await;
    let client = Client::new(&app);
    assert_eq!(say(&client, "web:dan", "dan", "hi").await, "reply to: hi");
    let rows = app.store.spend_rows(0).await.unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(
        (r.state.as_str(), r.cost, r.held, r.person.as_deref()),
        ("settled", Some(BILL), 0, Some("web-dan"))
    );
    assert_eq!((r.cause.as_str(), r.model.as_str()), ("turn", "fake-model"));
    app.shutdown().await;
}

/// A call cut off by `/stop` never settles; its hold is let go with the turn, so the person's
/// next message is not refused for a worst case that was never spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_turn_lets_go_of_its_hold() {
    use herald_test_support::fake_llm::Step;
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    // Room for one hold of 0.1, not two.
    let app = start(&Db::Sqlite, &llm, &data, |c| {
        c.budget.person_daily = Some(0.15)
    })
    .await;
    let client = Arc::new(Client::new(&app));
    llm.push(Step::Delay(
        Duration::from_secs(20),
        Box::new(Step::Reply("never sent".into())),
    ));
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { say(&client, "web:eve", "eve", "think slowly").await })
    };
    herald_test_support::harness::wait_until(
        "the model call to start",
        Duration::from_secs(10),
        || async { llm.request_count() >= 1 },
    )
    .await;
    assert_eq!(say(&client, "web:eve", "eve", "/stop").await, "Stopped.");
    let _ = slow.await;
    assert_eq!(
        say(&client, "web:eve", "eve", "again").await,
        "reply to: again"
    );
    app.shutdown().await;
}

/// A child agent's calls are priced with its parent's turn: the ledger marks them as a
/// child's, and the turn's row counts them in its cost.
#[tokio::test]
async fn a_child_agent_spends_with_its_parent_turn() {
    use herald_test_support::fake_llm::Step;
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = start(&Db::Sqlite, &llm, &data, |_| {}).await;
    let client = Client::new(&app);
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
    assert_eq!(
        say(&client, "web:gus", "gus", ask).await,
        "The disk filled up, says my helper."
    );
    let causes: Vec<String> = app
        .store
        .spend_rows(0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.cause)
        .collect();
    assert_eq!(causes, ["turn", "child", "turn"]);
    let turns = app.store.turns(&LaneKey::new("web:gus"), 10).await.unwrap();
    assert_eq!(turns.last().unwrap().cost, Some(3 * BILL), "{turns:?}");
    app.shutdown().await;
}
