//! A reload of the model and the prompt through the real core, as a person sees it: a reply
//! being streamed when the reload lands finishes whole on the model it started with; the next
//! turn asks the new model; the new operator instructions reach the next session (a session's
//! system prompt stays byte-stable for the provider's prompt cache) and not the open one; a
//! reloaded budget cap refuses the next turn, and lifting it answers again; an agent added by
//! reload keeps its memory in its own files.

use std::time::Duration;

use herald::adapters::split::{split_message, Measure, TELEGRAM_LIMIT};
use herald::adapters::telegram::format::markdown_to_html;
use herald::app::App;
use herald::config::{AgentSpec, Binding, PriceConfig};
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::fake_llm::Step;
use herald_test_support::fake_telegram::{message_json, FakeTelegram};
use herald_test_support::harness::{init, test_config, wait_until, Client};
use herald_test_support::telegram::{fakes, tg_config, USER};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn view(tg: &FakeTelegram) -> Vec<String> {
    tg.chat_view(USER).into_iter().map(|m| m.text).collect()
}

#[tokio::test]
async fn a_reloaded_model_and_prompt_reach_the_next_turn_and_session_not_the_running_one() {
    let (tg, llm, data) = fakes().await;
    let mut c = tg_config(&tg, &llm, &data);
    c.streaming.enabled = Some(true);
    c.streaming.edit_interval_ms = 300;
    c.agent.system_message = Some("Answer plainly.".into());
    let start = c.clone();
    let app = App::start(c).await.unwrap();
    let story = (0..100)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    llm.push_when(
        "long story",
        Step::stream(&story, 20, Duration::from_millis(60)),
    );
    llm.push_when("and now", Step::Reply("Now on the new model.".into()));
    llm.push_when("fresh start", Step::Reply("Arr, a fresh start.".into()));

    tg.push_message(|id| message_json(id, USER, USER, "tell me a long story"));
    wait_until("the story starts streaming", WAIT, || async {
        !view(&tg).is_empty()
    })
    .await;
    let mut next = start.clone();
    next.llm.model = Some("fake-model-2".into());
    next.agent.system_message = Some("Speak like a pirate.".into());
    let report = app.reload.apply(next).await.expect("a valid reload");
    assert_eq!(report.applied, ["agent.system_message", "llm.model"]);
    assert!(report.restart_needed.is_empty(), "{report:?}");

    let whole: Vec<String> = split_message(&story, TELEGRAM_LIMIT, Measure::Utf16)
        .iter()
        .map(|c| markdown_to_html(c))
        .collect();
    wait_until("the story ends whole", WAIT, || async {
        view(&tg) == whole
    })
    .await;
    let story_req = llm.last_request();
    assert_eq!(
        story_req.body["model"], "fake-model",
        "the running turn kept its model"
    );

    tg.push_message(|id| message_json(id, USER, USER, "and now?"));
    wait_until("the next turn is answered", WAIT, || async {
        view(&tg).last().map(String::as_str) == Some("Now on the new model.")
    })
    .await;
    let now = llm.last_request();
    assert_eq!(
        now.body["model"], "fake-model-2",
        "the next turn asks the new model"
    );
    assert!(
        now.system().contains("Answer plainly."),
        "the open session keeps its prompt"
    );
    assert!(!now.system().contains("pirate"));

    tg.push_message(|id| message_json(id, USER, USER, "/new"));
    tg.push_message(|id| message_json(id, USER, USER, "a fresh start"));
    wait_until("the new session is answered", WAIT, || async {
        view(&tg).last().map(String::as_str) == Some("Arr, a fresh start.")
    })
    .await;
    let fresh = llm.last_request();
    assert_eq!(fresh.body["model"], "fake-model-2");
    assert!(
        fresh.system().contains("Speak like a pirate."),
        "{}",
        fresh.system()
    );
    assert!(!fresh.system().contains("Answer plainly."));
    app.shutdown().await;
}

async fn say(client: &Client, text: &str) -> String {
    let (status, body) = client
        .chat_body(serde_json::json!({"lane": "web:ann", "text": text, "sender": "ann"}))
        .await;
    assert_eq!(status, 200, "{body}");
    body["reply"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_reloaded_budget_cap_refuses_the_next_turn_and_lifting_it_answers_again() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.cron.enabled = false;
    c.budget.prices = vec![PriceConfig {
        model: "fake-*".into(),
        input: Some(0.0),
        output: Some(1000.0),
        cache_read: Some(0.0),
        cache_write: Some(0.0),
    }];
    let start = c.clone();
    let app = App::start(c).await.unwrap();
    let client = Client::new(&app);
    assert_eq!(say(&client, "first").await, "reply to: first");

    let mut capped = start.clone();
    capped.budget.person_daily = Some(0.01);
    let report = app.reload.apply(capped).await.expect("a valid reload");
    assert_eq!(report.applied, ["budget.person_daily"]);
    let refused = say(&client, "second").await;
    assert!(
        refused.starts_with("You have reached your daily budget"),
        "{refused}"
    );
    assert_eq!(llm.request_count(), 1, "the model heard a refused turn");

    let report = app.reload.apply(start).await.expect("a valid reload");
    assert_eq!(report.applied, ["budget.person_daily"]);
    assert_eq!(say(&client, "third").await, "reply to: third");
    assert_eq!(llm.request_count(), 2);
    app.shutdown().await;
}

#[tokio::test]
async fn an_agent_added_by_reload_keeps_memory_in_its_own_files() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.cron.enabled = false;
    let app = App::start(c.clone()).await.unwrap();
    let client = Client::new(&app);
    let mut next = c.clone();
    next.agents = vec![AgentSpec {
        name: "coder".into(),
        model: Some("fake-coder".into()),
        ..AgentSpec::default()
    }];
    next.bindings = vec![Binding {
        agent: "coder".into(),
        platform: Some("web".into()),
        ..Binding::default()
    }];
    let report = app.reload.apply(next).await.expect("a valid reload");
    assert_eq!(report.applied, ["agents", "bindings"]);

    let fact = json!({"action": "add", "target": "user", "content": "Ann writes Rust"}).to_string();
    llm.push_when("remember", Step::ToolCall("memory".into(), fact));
    llm.push_when("remember", Step::Reply("Noted.".into()));
    assert_eq!(say(&client, "remember this").await, "Noted.");
    assert_eq!(llm.last_request().body["model"], "fake-coder");
    let result = llm.tool_results_for("remember")[0].clone();
    assert!(!result.contains("not available"), "{result}");
    let user = data.path().join("agents/coder/memory/web-ann/USER.md");
    let text = std::fs::read_to_string(&user).unwrap_or_default();
    assert!(
        text.contains("Ann writes Rust"),
        "{}: {text:?}",
        user.display()
    );
    assert!(
        !data.path().join("memory/web-ann/USER.md").exists(),
        "the default agent's files are not the coder's"
    );
    app.shutdown().await;
}
