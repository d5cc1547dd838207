//! Approvals in a Telegram group with two allowed members (issue 25): with
//! `approvals.only_requester` on (the default) only the member whose message led to the call
//! answers it; the other is told who can and nothing changes. Off, either may answer.

use std::time::Duration;

use herald::app::App;
use herald_test_support::fake_llm::Step;
use herald_test_support::fake_telegram::{FakeTelegram, BOT_USERNAME};
use herald_test_support::harness::wait_until;
use herald_test_support::telegram::{fakes, tg_config, USER};
use serde_json::json;

const GROUP: i64 = -100_777;
const OTHER: i64 = 2002;

async fn until(what: &str, cond: impl Fn() -> bool) {
    wait_until(what, Duration::from_secs(10), || {
        let ok = cond();
        async move { ok }
    })
    .await;
}

/// The group asks for a skill proposal (made to ask by `tools.require_approval`) and waits
/// for the question; returns its message id and approve-button data.
async fn ask_in_group(
    tg: &FakeTelegram,
    llm: &herald_test_support::fake_llm::FakeLlm,
    name: &str,
) -> (i64, String) {
    llm.push(Step::ToolCall(
        "skill_manage".into(),
        json!({"action": "create", "name": name, "description": "Sort bug reports",
            "body": "1. Label it."})
        .to_string(),
    ));
    let before = tg.questions().len();
    let mention = format!("@{BOT_USERNAME}");
    tg.push_group_text(
        GROUP,
        USER,
        &format!("{mention} make a skill"),
        Some(&mention),
    );
    until("the question", || tg.questions().len() > before).await;
    let q = tg.questions().pop().unwrap();
    (q.message_id, q.approve)
}

async fn start(
    only_requester: bool,
) -> (
    FakeTelegram,
    herald_test_support::fake_llm::FakeLlm,
    tempfile::TempDir,
    App,
) {
    let (tg, llm, data) = fakes().await;
    std::fs::create_dir_all(data.path().join("skills")).unwrap();
    let mut c = tg_config(&tg, &llm, &data);
    c.tools.require_approval = vec!["skill_manage".into()];
    c.telegram.allowed_users.push(OTHER.to_string());
    c.approvals.only_requester = only_requester;
    let app = App::start(c).await.expect("app starts");
    (tg, llm, data, app)
}

#[tokio::test]
async fn in_a_group_only_the_requester_answers_their_own_request() {
    let (tg, llm, data, app) = start(true).await;
    let (qid, approve) = ask_in_group(&tg, &llm, "triage").await;
    let proposed = || data.path().join("skills/.proposed/triage").exists();

    // Another allowed member of the group presses Approve: told who can, nothing runs.
    tg.push_button_press(GROUP, OTHER, qid, &approve);
    until("the answer", || !tg.calls("answercallbackquery").is_empty()).await;
    assert_eq!(
        tg.calls("answercallbackquery")[0]["text"],
        format!("Only User{USER} can answer this request.")
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!proposed(), "another member's press ran the tool");
    assert_eq!(llm.request_count(), 1, "the turn is still waiting");

    // The requester approves: it runs.
    tg.push_button_press(GROUP, USER, qid, &approve);
    until("the tool ran", proposed).await;
    assert_eq!(tg.calls("answercallbackquery")[1]["text"], "Approved.");
    app.shutdown().await;
}

#[tokio::test]
async fn with_only_requester_off_any_allowed_member_answers() {
    let (tg, llm, data, app) = start(false).await;
    let (qid, approve) = ask_in_group(&tg, &llm, "triage").await;
    tg.push_button_press(GROUP, OTHER, qid, &approve);
    until("the tool ran", || {
        data.path().join("skills/.proposed/triage").exists()
    })
    .await;
    assert_eq!(tg.calls("answercallbackquery")[0]["text"], "Approved.");
    app.shutdown().await;
}
