//! Issue 25, cron jobs made in a conversation: a floor on how often they may run
//! (`cron.chat_min_interval_secs`), a question before one is created (`tools.require_approval`
//! holds `cron.create` by default), and a maker who lost access stops their jobs: the fire is
//! skipped, the job paused, and `herald cron list` says why. Over the real teloxide client and
//! the fake Bot API, with the scheduler on a test clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use herald::app::App;
use herald::cli::cron::{execute, CronCmd};
use herald::cron::JobSpec;
use herald::domain::LaneKey;
use herald::store::{FireStatus, PairingAsk};
use serde_json::json;

use herald_test_support::fake_llm::Step;
use herald_test_support::fake_telegram::FakeTelegram;
use herald_test_support::harness::wait_until;
use herald_test_support::telegram::{fakes, tg_config, USER};

fn create(name: &str, schedule: &str) -> Step {
    Step::ToolCall(
        "cron".into(),
        json!({"action": "create", "name": name, "schedule": schedule, "prompt": "Say hi."})
            .to_string(),
    )
}

async fn replied(tg: &FakeTelegram, needle: &str) {
    wait_until(
        &format!("a reply with {needle:?}"),
        Duration::from_secs(20),
        || async { tg.sent_messages().iter().any(|m| m.text.contains(needle)) },
    )
    .await;
}

#[tokio::test]
async fn a_chat_job_faster_than_the_floor_is_refused_with_the_floor_named() {
    let (tg, llm, data) = fakes().await;
    let mut c = tg_config(&tg, &llm, &data);
    // No question before the create: this test is about the floor alone.
    c.tools.require_approval = Vec::new();
    let app = App::start(c).await.unwrap();
    for (i, schedule) in ["every 1s", "* * * * *", "every 4m"]
        .into_iter()
        .enumerate()
    {
        let ask = format!("ping me often ({i})");
        llm.push_when(&ask, create(&format!("fast{i}"), schedule));
        llm.push_when(&ask, Step::Reply(format!("Could not ({i}).")));
        tg.push_private_text(USER, USER, &ask);
        replied(&tg, &format!("Could not ({i}).")).await;
        let result = llm.tool_results_for(&ask).join("\n");
        assert!(
            result.contains("at most once every 5 minutes")
                && result.contains("cron.chat_min_interval_secs"),
            "{schedule}: {result}"
        );
    }
    // At the floor it is accepted.
    llm.push_when("every five", create("ok", "every 5m"));
    llm.push_when("every five", Step::Reply("Scheduled.".into()));
    tg.push_private_text(USER, USER, "every five minutes please");
    replied(&tg, "Scheduled.").await;
    assert!(llm.tool_results_for("every five")[0].starts_with("added cron job \"ok\""));
    let jobs = app.store.cron_jobs().await.unwrap();
    assert_eq!(
        jobs.iter()
            .map(|j| j.spec.schedule.as_str())
            .collect::<Vec<_>>(),
        ["every 5m"]
    );
    app.shutdown().await;
    tg.shutdown().await;
}

#[tokio::test]
async fn creating_a_chat_job_asks_first_by_default_and_listing_does_not() {
    let (tg, llm, data) = fakes().await;
    let app = App::start(tg_config(&tg, &llm, &data)).await.unwrap();
    llm.push_when(
        "what is scheduled",
        Step::ToolCall("cron".into(), json!({"action": "list"}).to_string()),
    );
    llm.push_when("what is scheduled", Step::Reply("Nothing yet.".into()));
    tg.push_private_text(USER, USER, "what is scheduled?");
    replied(&tg, "Nothing yet.").await;
    assert!(tg.questions().is_empty(), "listing asked a question");

    llm.push_when("hourly", create("hourly", "every 1h"));
    llm.push_when("hourly", Step::Reply("Done.".into()));
    tg.push_private_text(USER, USER, "say hi hourly");
    wait_until("a question", Duration::from_secs(20), || async {
        !tg.questions().is_empty()
    })
    .await;
    let q = tg.questions().pop().unwrap();
    assert!(
        q.text.contains("cron") && q.text.contains("every 1h"),
        "{}",
        q.text
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        app.store.cron_jobs().await.unwrap().is_empty(),
        "created before the answer"
    );
    tg.push_button_press(USER, USER, q.message_id, &q.approve);
    replied(&tg, "Done.").await;
    assert!(llm.tool_results_for("hourly")[0].starts_with("added cron job \"hourly\""));
    assert_eq!(app.store.cron_jobs().await.unwrap().len(), 1);
    app.shutdown().await;
    tg.shutdown().await;
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 6, 0, 0).unwrap()
}

const PAIRED: i64 = 3003;

#[tokio::test]
async fn a_job_whose_maker_lost_access_is_paused_at_its_next_fire_and_says_why() {
    let (tg, llm, data) = fakes().await;
    let mut c = tg_config(&tg, &llm, &data);
    c.cron.enabled = false;
    let app = App::start(c.clone()).await.unwrap();
    // Someone let in by pairing, not by the allowlist.
    let paired = PAIRED.to_string();
    app.store
        .pairing_request(&PairingAsk {
            platform: "telegram",
            sender_id: &paired,
            sender_name: "carol",
            chat_id: &paired,
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
    // The job Carol made in her chat (as the `cron` tool stores it).
    let lane = LaneKey::new(&format!("telegram:{PAIRED}"));
    let spec = JobSpec {
        name: format!("telegram_{PAIRED}.hello"),
        schedule: "every 1h".into(),
        prompt: "Say hello to Carol.".into(),
        deliver: vec![lane.to_string()],
        timezone: None,
        catch_up: None,
        enabled: true,
        budget: None,
    };
    app.store
        .cron_job_add_owned(
            &spec,
            &lane,
            &format!("telegram:{PAIRED}"),
            t0().timestamp_millis(),
        )
        .await
        .unwrap();
    let now = Arc::new(Mutex::new(
        t0() + TimeDelta::hours(1) + TimeDelta::seconds(5),
    ));
    let clock = now.clone();
    let sched = app
        .scheduler("test/cron")
        .with_clock(Arc::new(move || *clock.lock().unwrap()));
    assert_eq!(sched.tick().await.unwrap().started, 1);
    // Briefs in Carol's chat (her pairing notice is there too, and may land at the same time).
    let to_carol = || {
        tg.sent_messages()
            .iter()
            .filter(|m| m.chat_id == PAIRED && m.text.contains("Say hello to Carol"))
            .count()
    };
    wait_until(
        "the first run delivered",
        Duration::from_secs(20),
        || async { to_carol() == 1 },
    )
    .await;

    // The operator revokes her; her job's next fire does not run.
    assert!(app.store.sender_revoke("telegram", &paired).await.unwrap());
    *now.lock().unwrap() = t0() + TimeDelta::hours(2) + TimeDelta::seconds(5);
    let pass = sched.tick().await.unwrap();
    assert_eq!((pass.started, pass.skipped), (0, 1), "{pass:?}");
    let job = app.store.cron_job_get(&spec.name).await.unwrap().unwrap();
    assert!(job.paused);
    let at = *now.lock().unwrap();
    let listed = execute(app.store.as_ref(), &c, CronCmd::List, at)
        .await
        .unwrap();
    assert!(
        listed.contains(&format!(
            "paused: its owner telegram:{PAIRED} is no longer allowed to use the agent"
        )),
        "{listed}"
    );
    let fires = app.store.cron_fires(Some(&spec.name), 10).await.unwrap();
    assert_eq!(fires[0].status, FireStatus::Skipped);
    assert!(fires[0]
        .note
        .as_deref()
        .unwrap_or("")
        .contains("no longer allowed"));
    // Later passes leave it paused and send nothing.
    *now.lock().unwrap() = t0() + TimeDelta::hours(3) + TimeDelta::seconds(5);
    assert_eq!(sched.tick().await.unwrap().started, 0);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(to_carol(), 1, "nothing delivered after the revocation");
    app.shutdown().await;
    tg.shutdown().await;
}
