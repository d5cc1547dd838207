//! The web chat page as a person keeps it open: a lane's live events (replayed from the last
//! id seen, then streamed, read from the store), a scheduled brief arriving while the page is
//! open, a reply slower than `web.reply_timeout_secs` landing later, Markdown rendered without
//! letting markup through, earlier sessions to read, and a new conversation. The page tests
//! drive a real headless Chromium; screenshots go to `$HERALD_SCREENS` when it is set.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use eventsource_stream::Eventsource;
use futures::StreamExt;
use herald::app::App;
use herald::config::Config;
use herald::cron::{JobSpec, Scheduler};
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, wait_until, Client};
use herald_test_support::webdriver::{find, Driver};
use serde_json::{json, Value};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 6, 0, 0).unwrap()
}

async fn start(tune: impl FnOnce(&mut Config)) -> (FakeLlm, App, tempfile::TempDir) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.cron.enabled = false;
    tune(&mut c);
    let app = App::start(c).await.expect("app starts");
    (llm, app, data)
}

/// The next `n` events of a lane's stream: (event, id, data).
async fn next_events(
    events: &mut (impl futures::Stream<Item = Result<eventsource_stream::Event, impl std::fmt::Debug>>
              + Unpin),
    n: usize,
) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    while out.len() < n {
        let ev = tokio::time::timeout(Duration::from_secs(15), events.next())
            .await
            .expect("an event in time")
            .expect("the stream stays open")
            .expect("a well-formed event");
        out.push((ev.event, ev.id, serde_json::from_str(&ev.data).unwrap()));
    }
    out
}

async fn open_events(
    app: &App,
    lane: &str,
    last_id: Option<&str>,
) -> impl futures::Stream<Item = Result<eventsource_stream::Event, impl std::fmt::Debug>> + Unpin {
    let mut req =
        reqwest::Client::new().get(format!("http://{}/api/v1/lanes/{lane}/events", app.addr));
    if let Some(id) = last_id {
        req = req.header("last-event-id", id);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    Box::pin(resp.bytes_stream().eventsource())
}

#[tokio::test]
async fn lane_events_replay_after_the_last_id_seen_then_stream_new_messages() {
    let (_llm, app, _data) = start(|_| {}).await;
    let client = Client::new(&app);
    client.chat("web:live", "one").await;
    client.chat("web:live", "two").await;

    let mut all = open_events(&app, "web:live", None).await;
    let first = next_events(&mut all, 4).await;
    let texts: Vec<(&str, &str)> = first
        .iter()
        .map(|(_, _, d)| (d["role"].as_str().unwrap(), d["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        texts,
        [
            ("user", "one"),
            ("assistant", "reply to: one"),
            ("user", "two"),
            ("assistant", "reply to: two")
        ]
    );
    assert!(first
        .iter()
        .all(|(e, id, d)| e == "message" && id.parse::<i64>().ok() == d["id"].as_i64()));

    // Reconnecting with the id of the second message replays from the third on.
    let mut resumed = open_events(&app, "web:live", Some(&first[1].1)).await;
    let again = next_events(&mut resumed, 2).await;
    assert_eq!(again[0].2["content"], "two");
    assert_eq!(again[1].2["content"], "reply to: two");

    // New messages arrive on both open streams, without a new request.
    client.chat("web:live", "three").await;
    for events in [&mut all, &mut resumed] {
        let new = next_events(events, 2).await;
        assert_eq!(new[0].2["content"], "three");
        assert_eq!(new[1].2["content"], "reply to: three");
    }

    // The earlier sessions: /new rotates, the list shows both, the old one reads back.
    client.chat("web:live", "/new").await;
    client.chat("web:live", "four").await;
    let (status, body) = client.get("/api/v1/lanes/web:live/sessions").await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    let sessions = body["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{body}");
    assert_eq!(sessions[0]["open"], true);
    let old = sessions[1]["id"].as_str().unwrap();
    let (status, body) = client
        .get(&format!("/api/v1/lanes/web:live/sessions/{old}/messages"))
        .await;
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["messages"].as_array().unwrap().len(), 6, "{body}");
    let new = next_events(&mut all, 3).await;
    assert_eq!(new[0].0, "session", "{new:?}");
    assert_eq!(new[1].2["content"], "four");
    // Another lane's session is not readable through this lane.
    let (status, _) = client
        .get(&format!("/api/v1/lanes/web:other/sessions/{old}/messages"))
        .await;
    assert_eq!(status, 404);
    app.shutdown().await;
}

/// Headless Chromium on the running app's page, or `None` (the test is skipped) without it.
async fn browser(app: &App, lane: &str) -> Option<Driver> {
    let (Some(chromium), Some(chromedriver)) = (
        find(&["chromium", "chromium-browser", "google-chrome"]),
        find(&["chromedriver"]),
    ) else {
        herald_test_support::skip_or_fail(
            "chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
        );
        return None;
    };
    let driver = Driver::start(&chromedriver, &chromium).await;
    driver
        .cmd("url", json!({"url": format!("http://{}/", app.addr)}))
        .await;
    driver
        .cmd(
            "execute/sync",
            json!({"script": "const l = document.getElementById('lane'); l.value = arguments[0]; \
                l.dispatchEvent(new Event('change'));", "args": [lane]}),
        )
        .await;
    driver.wait_text("#status", |t| t == "live").await;
    Some(driver)
}

async fn type_and_send(driver: &Driver, text: &str) {
    let el = driver.find("#text").await;
    driver
        .cmd(&format!("element/{el}/value"), json!({"text": text}))
        .await;
    driver.click("#send").await;
}

async fn eval(driver: &Driver, script: &str) -> Value {
    driver
        .cmd("execute/sync", json!({"script": script, "args": []}))
        .await
}

#[tokio::test]
async fn a_scheduled_brief_appears_on_the_open_page_as_the_agents_message() {
    let (llm, app, _data) = start(|_| {}).await;
    let Some(driver) = browser(&app, "web:page").await else {
        return;
    };
    // The real scheduler, its clock moved past the job's first fire.
    let now = Arc::new(Mutex::new(t0()));
    let clock = now.clone();
    let sched: Scheduler = app
        .scheduler("test/cron")
        .with_clock(Arc::new(move || *clock.lock().unwrap()));
    let spec = JobSpec {
        name: "morning".into(),
        schedule: "every 1h".into(),
        prompt: "Write the morning brief.".into(),
        deliver: vec!["web:page".into()],
        timezone: None,
        catch_up: None,
        enabled: true,
        budget: None,
    };
    app.store
        .cron_job_add(&spec, t0().timestamp_millis())
        .await
        .unwrap();
    llm.push(Step::Reply("Rain **today**: take an umbrella.".into()));
    *now.lock().unwrap() = t0() + TimeDelta::hours(1) + TimeDelta::seconds(2);
    sched.tick().await.unwrap();

    let shown = driver
        .wait_text(".msg.assistant.brief", |t| t.contains("take an umbrella"))
        .await;
    assert!(shown.starts_with("Scheduled brief: morning"), "{shown:?}");
    assert_eq!(
        eval(
            &driver,
            "return document.querySelector('.msg.brief strong').innerText"
        )
        .await,
        "today"
    );
    assert_eq!(
        eval(
            &driver,
            "return document.querySelectorAll('#log .msg.user').length"
        )
        .await,
        0,
        "no user bubble for a brief"
    );
    screenshot(&driver, "brief").await;
    driver.stop().await;
    app.shutdown().await;
}

#[tokio::test]
async fn a_reply_slower_than_the_reply_timeout_appears_when_it_lands() {
    let (llm, app, _data) = start(|c| c.web.reply_timeout_secs = 1).await;
    let Some(driver) = browser(&app, "web:slow").await else {
        return;
    };
    llm.push(Step::Delay(
        Duration::from_secs(4),
        Box::new(Step::Reply("late, but *here*".into())),
    ));
    type_and_send(&driver, "take your time").await;
    driver
        .wait_text(".msg.assistant:last-child", |t| {
            t.starts_with("Still working")
        })
        .await;
    driver
        .wait_text(".msg.assistant:last-child", |t| t == "late, but here")
        .await;
    assert_eq!(
        eval(
            &driver,
            "return document.querySelectorAll('#log .msg.assistant').length"
        )
        .await,
        1,
        "the answer took the place kept for it"
    );
    assert_eq!(
        eval(
            &driver,
            "return document.querySelectorAll('#log .msg.user').length"
        )
        .await,
        1,
        "the question is shown once"
    );
    screenshot(&driver, "slow-reply").await;
    driver.stop().await;
    app.shutdown().await;
}

#[tokio::test]
async fn markdown_renders_and_markup_in_a_reply_stays_text() {
    let (llm, app, _data) = start(|_| {}).await;
    let Some(driver) = browser(&app, "web:md").await else {
        return;
    };
    llm.push(Step::Reply(
        "**x** and <img src=x onerror=\"document.title='pwned'\"> and `code`\n\n\
         - one\n- two\n\n[site](https://example.org) [bad](javascript:alert(1))"
            .into(),
    ));
    type_and_send(&driver, "format something").await;
    let shown = driver
        .wait_text(".msg.assistant:last-child", |t| t.contains("two"))
        .await;
    assert!(shown.contains("<img src=x onerror="), "{shown:?}");
    let probe = eval(
        &driver,
        "const m = document.querySelector('.msg.assistant:last-child'); return {
            bold: m.querySelector('strong').innerText,
            code: m.querySelector('code').innerText,
            items: m.querySelectorAll('li').length,
            imgs: document.querySelectorAll('#log img').length,
            links: [...m.querySelectorAll('a')].map(a => [a.getAttribute('href'), a.rel]),
            title: document.title };",
    )
    .await;
    assert_eq!(probe["bold"], "x", "{probe}");
    assert_eq!(probe["code"], "code", "{probe}");
    assert_eq!(probe["items"], 2, "{probe}");
    assert_eq!(probe["imgs"], 0, "{probe}");
    assert_eq!(
        probe["links"],
        json!([["https://example.org", "noopener noreferrer"]]),
        "only http(s) links become links: {probe}"
    );
    assert_ne!(probe["title"], "pwned");
    screenshot(&driver, "markdown").await;

    // A new conversation: the session rotates and the page says so.
    driver.click("#new").await;
    driver
        .wait_text("#log .divider", |t| t == "New conversation")
        .await;
    screenshot(&driver, "new-conversation").await;
    driver.stop().await;
    app.shutdown().await;
}

/// A correction sent while the answer is being written (steer mode): the page shows the
/// question, the words written so far, the correction, then the one final answer, in the
/// transcript's order, and nothing stale below it. Once the final answer landed above the
/// correction and the stale partial stayed at the bottom until a reload.
#[tokio::test]
async fn a_correction_mid_answer_shows_before_the_final_answer() {
    let (llm, app, _data) = start(|c| {
        c.streaming.enabled = Some(true);
        c.streaming.edit_interval_ms = 200;
    })
    .await;
    let Some(driver) = browser(&app, "web:steer").await else {
        return;
    };
    let plan = "Changing the config now: first the proxy block, then the upstream list, then \
                the timeouts, then a reload.";
    llm.push(Step::stream(plan, 6, Duration::from_millis(250)));
    let answer = "Not changing anything yet. The blast radius: the proxy and the two upstreams.";
    llm.push(Step::stream(answer, 12, Duration::from_millis(150)));
    type_and_send(&driver, "change the config").await;
    driver
        .wait_text(".msg.assistant:last-child", |t| t.contains("Changing"))
        .await;
    let correction = "wait: first tell me the blast radius";
    type_and_send(&driver, correction).await;

    let log = || async {
        eval(
            &driver,
            "return [...document.querySelectorAll('#log .msg')]
                .map(m => [m.classList.contains('user') ? 'user' : 'assistant', m.innerText]);",
        )
        .await
    };
    let shape = |v: &Value| -> Vec<(String, String)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p[0].as_str().unwrap().to_string(),
                    p[1].as_str().unwrap().trim().to_string(),
                )
            })
            .collect()
    };
    let settled = |rows: &[(String, String)]| {
        rows.len() == 4
            && rows[0] == ("user".into(), "change the config".into())
            && rows[1].0 == "assistant"
            && rows[1].1.starts_with("Changing")
            && plan.starts_with(&rows[1].1)
            && rows[2] == ("user".into(), correction.into())
            && rows[3] == ("assistant".into(), answer.into())
    };
    let last = &Mutex::new(Vec::new());
    let waited = tokio::time::timeout(Duration::from_secs(30), async {
        wait_until("the page settles", Duration::from_secs(60), || async {
            let rows = shape(&log().await);
            let ok = settled(&rows);
            *last.lock().unwrap() = rows;
            ok
        })
        .await
    })
    .await;
    assert!(waited.is_ok(), "the page shows {:?}", last.lock().unwrap());
    // The transcript's order is the page's order: a reload shows the same.
    driver.cmd("refresh", json!({})).await;
    driver.wait_text("#status", |t| t == "live").await;
    wait_until(
        "the reloaded page shows the same",
        Duration::from_secs(30),
        || async { settled(&shape(&log().await)) },
    )
    .await;
    screenshot(&driver, "steer-correction").await;
    driver.stop().await;
    app.shutdown().await;
}

/// Saves a PNG of the page under `$HERALD_SCREENS/<name>.png` when that variable is set.
async fn screenshot(driver: &Driver, name: &str) {
    let Ok(dir) = std::env::var("HERALD_SCREENS") else {
        return;
    };
    let png = driver.screenshot().await;
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(std::path::Path::new(&dir).join(format!("{name}.png")), png).unwrap();
}
