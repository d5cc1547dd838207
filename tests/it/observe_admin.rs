//! The admin page in a real headless Chromium (system packages `chromium` + `chromium-driver`),
//! driven over the W3C WebDriver protocol, after a scripted conversation; plus the admin JSON
//! API behind the bearer token.
//!
//! The WebDriver client is `herald_test_support::webdriver` (shared with the streaming web
//! chat test).

use herald::app::App;
use herald::store::{NewCapsule, PairingAsk, PairingOutcome};
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, test_config};
use herald_test_support::webdriver::{find, Driver};
use serde_json::{json, Value};

const TOKEN: &str = "admin-test-token";

async fn chat(base: &str, lane: &str, text: &str) -> Value {
    let r = reqwest::Client::new()
        .post(format!("{base}/api/v1/chat"))
        .bearer_auth(TOKEN)
        .json(&json!({"lane": lane, "text": text}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

async fn admin_get(base: &str, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(format!("{base}{path}"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn admin_api_lists_lanes_sessions_messages_and_outbox_behind_the_token() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.web.token = Some(herald::config::Secret::new(TOKEN));
    let app = App::start(config).await.unwrap();
    let base = format!("http://{}", app.addr);
    chat(&base, "web:alpha", "hello alpha").await;
    chat(&base, "web:beta", "hello beta").await;

    let (status, body) = admin_get(&base, "/api/v1/admin/lanes", None).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = admin_get(&base, "/api/v1/admin/lanes", Some("wrong")).await;
    assert_eq!(status, 401, "{body}");

    let (status, body) = admin_get(&base, "/api/v1/admin/lanes", Some(TOKEN)).await;
    assert_eq!(status, 200);
    let lanes = body["lanes"].as_array().unwrap();
    let names: Vec<&str> = lanes.iter().map(|l| l["lane"].as_str().unwrap()).collect();
    assert_eq!(names, ["web:beta", "web:alpha"], "newest activity first");
    for l in lanes {
        assert_eq!(l["queue"], 0, "{l}");
        assert!(l["session_id"].is_string(), "{l}");
        assert!(["active", "idle"].contains(&l["state"].as_str().unwrap()));
        assert_eq!(l["state"] == "active", l["lease_holder"].is_string(), "{l}");
    }

    let (_, body) = admin_get(&base, "/api/v1/admin/sessions?lane=web:alpha", Some(TOKEN)).await;
    let sessions = body["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert!(sessions[0].get("system_prompt").is_none());
    let id = sessions[0]["id"].as_str().unwrap();
    let (_, body) = admin_get(
        &base,
        &format!("/api/v1/admin/sessions/{id}/messages"),
        Some(TOKEN),
    )
    .await;
    let contents: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["hello alpha", "reply to: hello alpha"]);
    let (status, _) = admin_get(&base, "/api/v1/admin/sessions/nope/messages", Some(TOKEN)).await;
    assert_eq!(status, 404);

    let (_, body) = admin_get(&base, "/api/v1/admin/outbox", Some(TOKEN)).await;
    assert_eq!(body["recent"].as_array().unwrap().len(), 2);
    let (_, body) = admin_get(&base, "/api/v1/admin/lanes/web:alpha/turns", Some(TOKEN)).await;
    assert_eq!(body["turns"][0]["status"], "done", "{body}");
    put_degraded_capsule(&app, id).await;
    let (_, body) = admin_get(&base, "/api/v1/admin/capsules", Some(TOKEN)).await;
    assert_eq!(body["capsules"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["capsules"][0]["lane"], "web:alpha");
    assert_eq!(body["capsules"][0]["status"], "degraded");
    assert!(body["capsules"][0].get("text").is_none());
    let (status, body) = admin_get(&base, "/api/v1/admin/cron", Some(TOKEN)).await;
    assert_eq!(
        (status, body["jobs"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    app.shutdown().await;
}

/// A handoff build whose writer failed: the capsule is the transcript, status `degraded`.
async fn put_degraded_capsule(app: &App, session_id: &str) {
    app.store
        .capsule_put(
            &NewCapsule {
                lane: "web:alpha".into(),
                session_id: session_id.into(),
                status: herald::domain::BuildStatus::Degraded,
                text: "## Transcript (the writer failed)\nuser: hello alpha".into(),
                message_count: 2,
                confidential: false,
                created_at: herald::store::now_ms(),
                agent: "default".into(),
            },
            true,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn admin_page_in_headless_chromium_lists_lanes_and_shows_a_transcript() {
    init();
    let (Some(chromium), Some(chromedriver)) = (
        find(&["chromium", "chromium-browser", "google-chrome"]),
        find(&["chromedriver"]),
    ) else {
        herald_test_support::skip_or_fail(
            "chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
        );
        return;
    };
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.web.token = Some(herald::config::Secret::new(TOKEN));
    let app = App::start(config).await.unwrap();
    let base = format!("http://{}", app.addr);
    chat(&base, "web:alpha", "hello alpha").await;
    chat(&base, "web:beta", "hello beta").await;

    let driver = Driver::start(&chromedriver, &chromium).await;
    driver
        .cmd("url", json!({"url": format!("{base}/admin")}))
        .await;
    // Without the token the page says what it needs instead of showing an empty table.
    driver
        .wait_text("#status", |t| t.contains("token needed"))
        .await;
    let input = driver.find("#token").await;
    // Typing the token and leaving the field (Tab) stores it and reloads.
    driver
        .cmd(
            &format!("element/{input}/value"),
            json!({"text": format!("{TOKEN}\u{E004}")}),
        )
        .await;
    let lanes = driver
        .wait_text("#lanes tbody", |t| {
            t.contains("web:alpha") && t.contains("web:beta")
        })
        .await;
    assert!(
        lanes.contains("idle") || lanes.contains("active"),
        "{lanes}"
    );
    let outbox = driver
        .wait_text("#outbox-counts", |t| t.contains("sent 2"))
        .await;
    assert!(outbox.contains("failed 0"), "{outbox}");
    let session = app
        .store
        .session_current(&herald::domain::LaneKey::new("web:alpha"))
        .await
        .unwrap()
        .unwrap();
    put_degraded_capsule(&app, &session.id).await;
    driver
        .wait_text("#capsules", |t| t.contains("web:alpha: degraded"))
        .await;
    let class = driver
        .cmd(
            "execute/sync",
            json!({"script": "return document.querySelector('#capsules div').className;", "args": []}),
        )
        .await;
    assert_eq!(class, "degraded", "the degraded status is highlighted");

    // A stranger asked for access: the request shows with its code and is approved here.
    let asked = app
        .store
        .pairing_request(&PairingAsk {
            platform: "telegram",
            sender_id: "777",
            sender_name: "Stranger",
            chat_id: "777",
            new_code: "K7Q2MX",
            ttl_ms: 3_600_000,
            remind_every_ms: 60_000,
            max_pending: 5,
        })
        .await
        .unwrap();
    assert!(matches!(asked, PairingOutcome::Issued(_)));
    driver
        .wait_text("#pairing tbody", |t| {
            t.contains("K7Q2MX") && t.contains("Stranger")
        })
        .await;
    driver.click("#pairing tr[data-code='K7Q2MX'] button").await;
    driver
        .wait_text("#status", |t| t.contains("approved telegram K7Q2MX"))
        .await;
    assert!(app.store.sender_approved("telegram", "777").await.unwrap());
    driver
        .wait_text("#pairing tbody", |t| !t.contains("K7Q2MX"))
        .await;

    driver.click("#lanes tr[data-lane='web:alpha']").await;
    driver
        .wait_text("#sessions-lane", |t| t.contains("web:alpha"))
        .await;
    driver
        .wait_text("#sessions tbody", |t| {
            !t.contains("web:beta") && t.contains("web:alpha")
        })
        .await;
    driver.click("#sessions tr[data-session]").await;
    let messages = driver
        .wait_text("#messages", |t| t.contains("reply to: hello alpha"))
        .await;
    assert!(messages.contains("user: hello alpha"), "{messages}");
    driver.stop().await;
    app.shutdown().await;
}
