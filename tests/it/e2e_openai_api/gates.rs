//! The OpenAI-compatible API where a turn meets a gate: an approval asked in the key's
//! person's linked chat (or denied without one), and the budget refusing the turn.

use std::time::Duration;

use herald::config::{Person, Secret};
use herald_test_support::db::Db;
use herald_test_support::fake_llm::Step;
use herald_test_support::harness::wait_until;

use super::Api;

/// A call that needs the person's word: asked in the key's person's linked Telegram chat and
/// run once approved there; a person with no linked chat gets the call denied, and the model
/// reads why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_go_to_the_person_s_linked_chat() {
    use herald_test_support::fake_telegram::FakeTelegram;
    use herald_test_support::telegram::USER;
    let tg = FakeTelegram::start("123:api").await;
    let Some(api) = Api::start(Db::Sqlite, |c| {
        c.telegram.token = Some(Secret::new(tg.token()));
        c.telegram.api_url = tg.url().parse().expect("the fake's URL");
        c.telegram.allowed_users = vec![USER.to_string()];
        c.telegram.poll_timeout_secs = 1;
        c.tools.require_approval = vec!["memory".into()];
        c.people[0].ids = vec![format!("telegram:{USER}")];
        c.people.push(Person {
            name: "bo".into(),
            ids: vec![],
        });
        c.api.keys[1].person = "bo".into();
    })
    .await
    else {
        return;
    };
    let remember = r#"{"action":"add","target":"user","content":"Ana likes green tea."}"#;
    api.llm.push_when(
        "green tea",
        Step::ToolCall("memory".into(), remember.into()),
    );
    api.llm
        .push_when("green tea", Step::Reply("Remembered.".into()));
    let press = async {
        wait_until(
            "the question in Ana's chat",
            Duration::from_secs(20),
            || {
                let asked = !tg.questions().is_empty();
                async move { asked }
            },
        )
        .await;
        let q = tg.questions().pop().unwrap();
        assert!(q.text.contains("memory"), "{}", q.text);
        tg.push_button_press(USER, USER, q.message_id, &q.approve);
    };
    let (lines, ()) = tokio::join!(
        api.run(
            r#"
r = client.chat.completions.create(model="herald",
        messages=[{"role": "user", "content": "I like green tea."}])
out(text=r.choices[0].message.content)
"#
        ),
        press
    );
    assert_eq!(lines[0]["text"], "Remembered.");
    let user = std::fs::read_to_string(api.data.path().join("memory/ana/USER.md")).unwrap();
    assert!(user.contains("Ana likes green tea."), "{user}");

    api.llm.push_when(
        "black coffee",
        Step::ToolCall("memory".into(), remember.into()),
    );
    api.llm
        .push_when("black coffee", Step::Reply("I could not.".into()));
    let lines = api
        .run(
            r#"
import os
bo = OpenAI(api_key=os.environ["OTHER_KEY"], max_retries=0)
r = bo.chat.completions.create(model="herald",
        messages=[{"role": "user", "content": "I like black coffee."}])
out(text=r.choices[0].message.content)
"#,
        )
        .await;
    assert_eq!(lines[0]["text"], "I could not.");
    let told = api.llm.tool_results_for("black coffee").join("\n");
    assert!(told.contains("no linked Telegram chat"), "{told}");
    assert!(!api.data.path().join("memory/bo/USER.md").exists());
    assert_eq!(tg.questions().len(), 1, "nothing was asked for bo");
    api.app.shutdown().await;
}

/// A turn the budget refuses is a 429 `insufficient_quota` with `retry-after`, carrying the line
/// a chat would have shown (here: caps are on and the fake model has no price).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_over_budget_is_insufficient_quota() {
    let Some(api) = Api::start(Db::Sqlite, |c| c.budget.person_daily = Some(1.0)).await else {
        return;
    };
    let lines = api
        .run(
            r#"
try:
    client.chat.completions.create(model="herald", messages=[{"role": "user", "content": "hi"}])
except openai.RateLimitError as e:
    out(status=e.status_code, code=e.code, message=e.message,
        after=e.response.headers.get("retry-after"))
"#,
        )
        .await;
    assert_eq!(lines[0]["status"], 429, "{}", lines[0]);
    assert_eq!(lines[0]["code"], "insufficient_quota");
    assert_eq!(lines[0]["after"], "3600");
    assert_eq!(api.llm.request_count(), 0, "the model was never called");
    api.app.shutdown().await;
}
