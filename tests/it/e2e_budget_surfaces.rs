//! Budgets as people see them, end to end on the fake model's billed usage: `/usage` in a web
//! chat shows the person's own spending and what is left of their daily cap; a person over
//! `budget.person_daily` is refused, the approver is asked (the durable approval row, answered
//! over the web chat's approval route), only the approver's press counts, and the person's next
//! turn runs; `herald usage --by person --json` sums the same turns; the admin spend chart
//! answers only with the token; `herald cron add --budget` shows in `cron list`.

use std::time::Duration;

use herald::app::App;
use herald::budget::report::By;
use herald::cli::UsageArgs;
use herald::config::{Config, PriceConfig, Secret};
use herald_test_support::db::Db;
use herald_test_support::fake_llm::{Billing, FakeLlm};
use herald_test_support::harness::{init, test_config, wait_for, Client};
use herald_test_support::herald::Herald;
use serde_json::{json, Value};

const TOKEN: &str = "budget-admin-token";

/// Prompt tokens the fake bills per call: at 0.10 per million, each call costs 0.10 (and 8
/// output tokens at 1.00 per million).
const PROMPT: u64 = 1_000_000;
const CALL_NANOS: i64 = 100_000_000 + 8_000;

fn priced(c: &mut Config) {
    c.budget.prices = vec![PriceConfig {
        model: "fake-*".into(),
        input: Some(0.1),
        output: Some(1.0),
        cache_read: Some(0.05),
        cache_write: Some(0.1),
    }];
}

async fn say(client: &Client, who: &str, text: &str) -> String {
    let (status, body) = client
        .chat_body(json!({"lane": format!("web:{who}"), "text": text, "sender": who}))
        .await;
    assert_eq!(status, 200, "{body}");
    body["reply"].as_str().unwrap_or_default().to_string()
}

async fn press(client: &Client, id: &str, lane: &str, sender: Option<&str>) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/api/v1/approvals/{id}", client.base))
        .json(&json!({"lane": lane, "approve": true, "sender": sender}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn usage_by_person_is_extended_by_the_approver(db: Db) {
    init();
    let llm = FakeLlm::start().await;
    llm.set_billing(Billing::Fixed(PROMPT));
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.cron.enabled = false;
    priced(&mut config);
    config.budget.person_daily = Some(0.1);
    config.budget.approvers = vec!["web:boss".into()];
    db.apply(&mut config);
    let app = App::start(config.clone()).await.unwrap();
    let client = Client::new(&app);

    // The first turn fits the cap's worst case, and bills past it.
    assert_eq!(say(&client, "ann", "hello").await, "reply to: hello");
    let usage = say(&client, "ann", "/usage").await;
    for want in [
        "Your spending today",
        "- conversation (answers): 0.10 USD",
        "Your daily budget: 0.10 USD of 0.10 USD spent, 0.00 USD left",
    ] {
        assert!(usage.contains(want), "{want:?} in {usage}");
    }
    // Another person sees only their own (nothing).
    let bob = say(&client, "bob", "/usage").await;
    assert!(
        bob.contains("Your spending today") && bob.contains(": 0.00 USD"),
        "{bob}"
    );
    assert!(!bob.contains("0.10 USD of"), "{bob}");

    // Over the cap: refused before the model is asked.
    let refused = say(&client, "ann", "again").await;
    assert!(refused.contains("daily budget"), "{refused}");
    assert_eq!(llm.request_count(), 1);

    // The approver was told the cap was nearly spent, and is asked to extend it.
    let list = wait_for(
        "the approver's question",
        Duration::from_secs(10),
        async || {
            let (_, body) = client.get("/api/v1/lanes/web:boss/approvals").await;
            let v: Value = serde_json::from_str(&body).ok()?;
            (v["approvals"].as_array()?.len() == 1).then_some(v)
        },
    )
    .await;
    let row = &list["approvals"][0];
    assert_eq!(row["tool"], "budget", "{row}");
    let id = row["id"].as_str().unwrap();
    let notices = app.store.outbox_recent(50).await.unwrap();
    assert!(
        notices.iter().any(|n| n.lane.as_str() == "web:boss"
            && n.text.contains("has spent 0.10 USD of 0.10 USD today")),
        "{notices:?}"
    );

    // Only the approver answers: not the person over the cap, from their chat or the boss's.
    assert_eq!(press(&client, id, "web:ann", None).await.0, 403);
    assert_eq!(press(&client, id, "web:boss", Some("ann")).await.0, 403);
    assert_eq!(say(&client, "ann", "still no").await, refused);
    let (status, body) = press(&client, id, "web:boss", None).await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("approved")),
        "{body}"
    );
    assert_eq!(press(&client, id, "web:boss", None).await.0, 409);

    // The next turn runs on the extension.
    assert_eq!(say(&client, "ann", "third").await, "reply to: third");
    assert_eq!(llm.request_count(), 2);

    // `herald usage --by person --json` sums the same calls.
    let args = UsageArgs {
        by: By::Person,
        since: None,
        json: true,
    };
    let since = herald::cli::usage::since(&config, &args, chrono::Utc::now()).unwrap();
    let out = herald::cli::usage::report(app.store.as_ref(), &config, &args, since)
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{v}");
    let g = &groups[0];
    assert_eq!(g["key"], "web-ann");
    assert_eq!(g["calls"], 2);
    assert_eq!(g["fresh_input"], 2 * PROMPT);
    assert_eq!(g["output"], 16);
    let cost = g["cost"].as_f64().unwrap();
    assert!((cost - 2.0 * CALL_NANOS as f64 / 1e9).abs() < 1e-9, "{g}");
    app.shutdown().await;
}

herald_test_support::on_each_backend!(
    usage_and_an_approved_extension_sqlite,
    usage_and_an_approved_extension_postgres,
    usage_by_person_is_extended_by_the_approver
);

async fn admin_get(base: &str, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(format!("{base}{path}"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn the_spend_chart_answers_only_with_the_token() {
    init();
    let llm = FakeLlm::start().await;
    llm.set_billing(Billing::Fixed(PROMPT));
    let data = tempfile::tempdir().unwrap();
    let mut config = test_config(&llm, &data);
    config.cron.enabled = false;
    config.web.token = Some(Secret::new(TOKEN));
    priced(&mut config);
    let app = App::start(config).await.unwrap();
    let base = format!("http://{}", app.addr);
    let r = reqwest::Client::new()
        .post(format!("{base}/api/v1/chat"))
        .bearer_auth(TOKEN)
        .json(&json!({"lane": "web:a", "text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    for token in [None, Some("wrong")] {
        let (status, body) = admin_get(&base, "/api/v1/admin/spend", token).await;
        assert_eq!(status, 401, "{body}");
        assert!(body.get("days").is_none(), "{body}");
    }
    let (status, body) = admin_get(&base, "/api/v1/admin/spend?days=7", Some(TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    let days = body["days"].as_array().unwrap();
    assert_eq!(days.len(), 7);
    let today = days.last().unwrap();
    assert_eq!(today["calls"], 1, "{body}");
    assert!((today["cost"].as_f64().unwrap() - CALL_NANOS as f64 / 1e9).abs() < 1e-9);
    assert_eq!(days[0]["cost"], 0.0, "a quiet day is a zero");
    app.shutdown().await;
}

#[test]
fn cron_add_budget_shows_in_the_list_and_a_bad_one_is_refused() {
    let data = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Herald::new()
            .arg("--data-dir")
            .arg(data.path())
            .args(args)
            .output()
    };
    assert!(run(&["migrate"]).status.success());
    let add = |budget: &str| {
        let flag = format!("--budget={budget}");
        run(&[
            "cron",
            "add",
            "--name",
            "digest",
            "--schedule",
            "every 1h",
            "--prompt",
            "p",
            "--deliver",
            "web:x",
            flag.as_str(),
        ])
    };
    let bad = add("-1");
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--budget"), "{err}");
    assert!(add("0.5").status.success());
    let list = run(&["cron", "list"]);
    let out = String::from_utf8_lossy(&list.stdout);
    assert!(
        out.contains("digest") && out.contains("budget 0.50 USD"),
        "{out}"
    );
}

/// The approver on Telegram: the question arrives in their private chat with buttons, a press
/// by the person over the cap is refused, the approver's press extends the cap and closes the
/// question, and the person's next message is answered.
#[tokio::test]
async fn a_telegram_approver_extends_a_cap_with_a_button() {
    use herald_test_support::telegram::{fakes, tg_config, USER};
    const BOSS: i64 = 3003;
    let (tg, llm, data) = fakes().await;
    llm.set_billing(Billing::Fixed(PROMPT));
    let mut config = tg_config(&tg, &llm, &data);
    config.cron.enabled = false;
    config.telegram.allowed_users.push(BOSS.to_string());
    priced(&mut config);
    config.budget.person_daily = Some(0.1);
    config.budget.approvers = vec![format!("telegram:{BOSS}")];
    let app = App::start(config).await.unwrap();
    let sent_to = |chat: i64, needle: &str| {
        tg.sent_messages()
            .iter()
            .any(|m| m.chat_id == chat && m.text.contains(needle))
    };
    let until = async |what: &str, cond: &dyn Fn() -> bool| {
        wait_for(what, Duration::from_secs(10), async || cond().then_some(())).await
    };

    tg.push_private_text(USER, USER, "hello");
    until("the first answer", &|| sent_to(USER, "reply to: hello")).await;
    tg.push_private_text(USER, USER, "again");
    until("the budget line", &|| sent_to(USER, "daily budget")).await;
    until("the approver's question", &|| !tg.questions().is_empty()).await;
    let q = tg.questions().pop().unwrap();
    assert!(
        q.text
            .contains("Spend up to 0.10 USD more today on telegram-1001?"),
        "{}",
        q.text
    );
    assert!(
        sent_to(BOSS, "Spend up to"),
        "asked in the approver's own chat"
    );
    assert!(sent_to(BOSS, "has spent 0.10 USD of 0.10 USD today"));

    // The person over the cap presses the approver's button: refused, nothing granted.
    tg.push_button_press(BOSS, USER, q.message_id, &q.approve);
    until("the refusal", &|| {
        !tg.calls("answercallbackquery").is_empty()
    })
    .await;
    assert_eq!(
        tg.calls("answercallbackquery")[0]["text"],
        "You cannot answer this request."
    );
    tg.push_button_press(BOSS, BOSS, q.message_id, &q.approve);
    until("the approval", &|| {
        tg.calls("answercallbackquery").len() >= 2
    })
    .await;
    assert_eq!(tg.calls("answercallbackquery")[1]["text"], "Approved.");
    let edits = tg.calls("editmessagetext");
    assert!(
        edits
            .iter()
            .any(|e| e["text"].as_str().is_some_and(|t| t.contains("Extended"))),
        "{edits:?}"
    );

    tg.push_private_text(USER, USER, "third");
    until("the answer after the extension", &|| {
        sent_to(USER, "reply to: third")
    })
    .await;
    assert_eq!(llm.request_count(), 2);
    app.shutdown().await;
}
