//! Restarts, conflicts, the poller role and the webhook: nothing lost, nothing doubled.

use std::time::Duration;

use herald::app::App;
use herald::config::{Secret, TelegramMode};
use serde_json::json;

use super::{model_inputs, WAIT};
use herald_test_support::fake_llm::Step;
use herald_test_support::harness::wait_until;
use herald_test_support::telegram::{fakes, start, tg_config, USER};

#[tokio::test]
async fn stopped_after_commit_before_reply_then_restarted_replies_exactly_once() {
    let (tg, llm, data) = fakes().await;
    let mut config = tg_config(&tg, &llm, &data);
    config.server.shutdown_grace_secs = 1;
    // The model never answers: the update is in the inbox, the turn is running, no reply yet.
    llm.set_sticky(Some(Step::Hang));
    let app = App::start(config.clone()).await.unwrap();
    let update = tg.push_private_text(USER, USER, "survive a restart");
    wait_until("the turn to reach the model", WAIT, || async {
        llm.request_count() == 1
    })
    .await;
    app.shutdown().await;
    assert!(
        tg.sent_messages().is_empty(),
        "nothing was sent before the stop"
    );

    llm.set_sticky(None);
    let app = App::start(config).await.unwrap();
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].text, "reply to: survive a restart");
    herald_test_support::harness::quiet(&*app.store).await;
    assert_eq!(tg.sent_messages().len(), 1, "exactly one reply");
    assert_eq!(llm.request_count(), 2, "one interrupted turn, one answered");
    assert_eq!(
        app.store.kv_get("telegram:offset").await.unwrap(),
        Some((update + 1).to_string())
    );
    app.shutdown().await;
}

#[tokio::test]
async fn offset_is_persisted_across_restart() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data).await;
    let one = tg.push_private_text(USER, USER, "one");
    tg.wait_for_sent(1, WAIT).await;
    app.shutdown().await;

    // Sent while the daemon is down; the stored offset says where to resume.
    let two = tg.push_private_text(USER, USER, "two");
    let polls_before = tg.calls("getUpdates").len();
    let app = start(&tg, &llm, &data).await;
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "reply to: two");
    let first_poll = &tg.calls("getUpdates")[polls_before];
    assert_eq!(
        first_poll["offset"],
        json!(one + 1),
        "resumes from the stored offset"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(model_inputs(&llm), ["one", "two"], "none twice, none lost");
    assert_eq!(
        app.store.kv_get("telegram:offset").await.unwrap(),
        Some((two + 1).to_string())
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_polling_conflict_is_recovered_from() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data).await;
    wait_until("the daemon to poll", WAIT, || async {
        !tg.calls("getUpdates").is_empty()
    })
    .await;
    // Someone else polls with the same token: the daemon's waiting poll ends with 409.
    let http = reqwest::Client::new();
    let url = format!("{}/bot{}/getUpdates", tg.url(), tg.token());
    let body: serde_json::Value = http
        .post(url)
        .json(&json!({ "timeout": 0 }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["ok"], true);
    tg.push_private_text(USER, USER, "still listening?");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].text, "reply to: still listening?");
    app.shutdown().await;
}

#[tokio::test]
async fn the_poller_role_moves_to_the_standby_replica() {
    let (tg, llm, data) = fakes().await;
    let mut a = tg_config(&tg, &llm, &data);
    a.server.replica_id = Some("replica-a".into());
    let mut b = a.clone();
    b.server.replica_id = Some("replica-b".into());
    let app_a = App::start(a).await.unwrap();
    wait_until("replica a to take the poller role", WAIT, || async {
        app_a
            .store
            .lease_get("role:telegram-poller")
            .await
            .unwrap()
            .is_some()
    })
    .await;
    let app_b = App::start(b).await.unwrap();
    tg.push_private_text(USER, USER, "to whoever polls");
    tg.wait_for_sent(1, WAIT).await;
    let holder = app_b
        .store
        .lease_get("role:telegram-poller")
        .await
        .unwrap()
        .unwrap()
        .holder;
    assert!(holder.starts_with("replica-a/"), "{holder}");

    app_a.shutdown().await;
    tg.push_private_text(USER, USER, "anyone left?");
    let sent = tg.wait_for_sent(2, Duration::from_secs(30)).await;
    assert_eq!(sent[1].text, "reply to: anyone left?");
    let holder = app_b
        .store
        .lease_get("role:telegram-poller")
        .await
        .unwrap()
        .unwrap()
        .holder;
    assert!(holder.starts_with("replica-b/"), "{holder}");
    assert_eq!(tg.sent_messages().len(), 2);
    app_b.shutdown().await;
}

#[tokio::test]
async fn webhook_mode_checks_the_secret_and_answers_after_the_inbox() {
    let (tg, llm, data) = fakes().await;
    let mut c = tg_config(&tg, &llm, &data);
    c.telegram.mode = TelegramMode::Webhook;
    c.telegram.webhook_url = Some(
        "https://herald.example.org/telegram/webhook"
            .parse()
            .unwrap(),
    );
    c.telegram.webhook_secret = Some(Secret::new("hook-secret"));
    let app = App::start(c).await.unwrap();
    wait_until("setWebhook", WAIT, || async {
        !tg.calls("setWebhook").is_empty()
    })
    .await;
    let set = &tg.calls("setWebhook")[0];
    assert_eq!(set["url"], "https://herald.example.org/telegram/webhook");
    assert_eq!(set["secret_token"], "hook-secret");
    assert!(
        tg.calls("getUpdates").is_empty(),
        "webhook mode never polls"
    );

    let http = reqwest::Client::new();
    let hook = format!("http://{}/telegram/webhook", app.addr);
    let update = json!({ "update_id": 500, "message": support_message(USER, "via webhook") });
    let post = |secret: Option<&'static str>, body: String| {
        let mut req = http
            .post(&hook)
            .header("content-type", "application/json")
            .body(body);
        if let Some(s) = secret {
            req = req.header("X-Telegram-Bot-Api-Secret-Token", s);
        }
        req.send()
    };
    assert_eq!(post(None, update.to_string()).await.unwrap().status(), 401);
    assert_eq!(
        post(Some("wrong"), update.to_string())
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        post(Some("hook-secret"), "not json".into())
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        post(Some("hook-secret"), update.to_string())
            .await
            .unwrap()
            .status(),
        200
    );
    // Telegram redelivers when unsure: the duplicate is absorbed.
    assert_eq!(
        post(Some("hook-secret"), update.to_string())
            .await
            .unwrap()
            .status(),
        200
    );
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].text, "reply to: via webhook");
    herald_test_support::harness::quiet(&*app.store).await;
    assert_eq!(tg.sent_messages().len(), 1);
    assert_eq!(model_inputs(&llm), ["via webhook"]);
    app.shutdown().await;
}

fn support_message(user: i64, text: &str) -> serde_json::Value {
    herald_test_support::fake_telegram::message_json(77, user, user, text)
}

/// A reverse proxy forwards `https://host/bots/tg-7f3a` to the same path on the daemon: the
/// local route is the configured URL's path, not a fixed one.
#[tokio::test]
async fn webhook_is_served_on_the_path_of_webhook_url() {
    let (tg, llm, data) = fakes().await;
    let mut c = tg_config(&tg, &llm, &data);
    c.telegram.mode = TelegramMode::Webhook;
    c.telegram.webhook_url = Some("https://herald.example.org/bots/tg-7f3a".parse().unwrap());
    c.telegram.webhook_secret = Some(Secret::new("hook-secret"));
    let app = App::start(c).await.unwrap();
    wait_until("setWebhook", WAIT, || async {
        !tg.calls("setWebhook").is_empty()
    })
    .await;
    let http = reqwest::Client::new();
    let post = |path: &str| {
        let update = json!({ "update_id": 501, "message": support_message(USER, "via my path") });
        http.post(format!("http://{}{path}", app.addr))
            .header("content-type", "application/json")
            .header("X-Telegram-Bot-Api-Secret-Token", "hook-secret")
            .body(update.to_string())
            .send()
    };
    assert_eq!(post("/telegram/webhook").await.unwrap().status(), 404);
    assert_eq!(post("/bots/tg-7f3a").await.unwrap().status(), 200);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].text, "reply to: via my path");
    app.shutdown().await;
}
