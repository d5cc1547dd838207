//! A reload of the model and the prompt through the real core, as a person sees it: a reply
//! being streamed when the reload lands finishes whole on the model it started with; the next
//! turn asks the new model; the new operator instructions reach the next session (a session's
//! system prompt stays byte-stable for the provider's prompt cache) and not the open one.

use std::time::Duration;

use herald::adapters::split::{split_message, Measure, TELEGRAM_LIMIT};
use herald::adapters::telegram::format::markdown_to_html;
use herald::app::App;
use herald_test_support::fake_llm::Step;
use herald_test_support::fake_telegram::{message_json, FakeTelegram};
use herald_test_support::harness::wait_until;
use herald_test_support::telegram::{fakes, tg_config, USER};

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
