//! Approvals in the chat, end to end over the real teloxide client and the fake Bot API: a
//! tool the operator wants asked about pauses the turn, the question appears in the person's
//! own chat with Approve / Deny buttons, and only an allowed sender of that chat answers it.
//! The tool is the real `skill_manage` (its effect is a proposal file on disk), made to ask by
//! `tools.require_approval`.

use std::path::Path;
use std::time::Duration;

use herald::app::App;
use herald_test_support::fake_llm::Step;
use herald_test_support::fake_telegram::FakeTelegram;
use herald_test_support::harness::wait_until;
use herald_test_support::herald::{Herald, Running};
use herald_test_support::telegram::{fakes, tg_config, USER};
use serde_json::{json, Value};

/// The approval question the bot sent last: its message id, text and two buttons' data.
fn last_question(tg: &FakeTelegram) -> Option<(i64, String, String, String)> {
    tg.questions()
        .pop()
        .map(|q| (q.message_id, q.text, q.approve, q.deny))
}

/// Waits up to `secs` for `cond`.
async fn until(secs: u64, cond: impl Fn() -> bool) {
    wait_until("the condition", Duration::from_secs(secs), || {
        let ok = cond();
        async move { ok }
    })
    .await;
}

fn proposed(data: &Path, name: &str) -> bool {
    data.join("skills/.proposed").join(name).exists()
}

fn create_args(name: &str) -> String {
    json!({"action": "create", "name": name, "description": "Sort bug reports",
        "body": "1. Label it."})
    .to_string()
}

async fn wait_question(tg: &FakeTelegram, after: usize) -> (i64, String, String, String) {
    until(10, || {
        tg.calls("sendmessage").len() > after && last_question(tg).is_some()
    })
    .await;
    last_question(tg).expect("a question with buttons")
}

async fn start(
    tg: &FakeTelegram,
    llm: &herald_test_support::fake_llm::FakeLlm,
    data: &tempfile::TempDir,
    timeout_secs: u64,
) -> App {
    std::fs::create_dir_all(data.path().join("skills")).unwrap();
    let mut c = tg_config(tg, llm, data);
    c.tools.require_approval = vec!["skill_manage".into()];
    c.approvals.timeout_secs = timeout_secs;
    // A second allowed person, who may write here but is not in this private chat.
    c.telegram.allowed_users.push("2002".into());
    App::start(c).await.expect("app starts")
}

#[tokio::test]
async fn an_approved_call_runs_once_and_a_press_from_anyone_else_is_refused() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data, 60).await;

    llm.push(Step::ToolCall("skill_manage".into(), create_args("triage")));
    tg.push_private_text(USER, USER, "make a triage skill");
    let (qid, text, approve, deny) = wait_question(&tg, 0).await;
    assert!(text.contains("skill_manage"), "{text}");
    assert!(
        text.contains("Sort bug reports"),
        "the arguments are shown: {text}"
    );
    assert!(
        approve.starts_with("ap:") && approve.ends_with(":y"),
        "{approve}"
    );
    assert!(deny.ends_with(":n"), "{deny}");
    // The turn is parked: nothing ran, the model was asked once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!proposed(data.path(), "triage"));
    assert_eq!(llm.request_count(), 1);

    // A stranger in the chat, and an allowed person pressing from another chat: both refused.
    tg.push_button_press(USER, 9999, qid, &approve);
    tg.push_button_press(2002, 2002, qid, &approve);
    until(10, || tg.calls("answercallbackquery").len() >= 2).await;
    for answer in tg.calls("answercallbackquery") {
        assert_eq!(
            answer["text"], "You cannot answer this request.",
            "{answer}"
        );
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !proposed(data.path(), "triage"),
        "a refused press ran the tool"
    );

    // The person approves: the tool runs once, the model sees its real result.
    tg.push_button_press(USER, USER, qid, &approve);
    until(10, || llm.request_count() >= 2).await;
    let result = llm.requests()[1].last_tool_result();
    assert!(result.contains("herald skills approve triage"), "{result}");
    assert!(proposed(data.path(), "triage"));
    until(10, || {
        tg.sent_messages()
            .iter()
            .any(|m| m.text.starts_with("reply to: make a triage skill"))
    })
    .await;
    // The question was closed (its buttons removed) with the outcome.
    let edits = tg.calls("editmessagetext");
    assert!(
        edits.iter().any(|e| e["message_id"] == json!(qid)
            && e["text"].as_str().unwrap_or("").starts_with("✅ Approved")),
        "{edits:?}"
    );
    // A second press of the same button changes nothing.
    tg.push_button_press(USER, USER, qid, &approve);
    until(10, || tg.calls("answercallbackquery").len() >= 4).await;
    let answers = tg.calls("answercallbackquery");
    assert_eq!(answers[2]["text"], "Approved.");
    assert_eq!(answers[3]["text"], "This request is no longer open.");
    app.shutdown().await;
}

#[tokio::test]
async fn a_denied_or_unanswered_call_is_never_made_and_the_model_is_told() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data, 2).await;

    llm.push(Step::ToolCall("skill_manage".into(), create_args("first")));
    tg.push_private_text(USER, USER, "make the first skill");
    let (qid, _, _, deny) = wait_question(&tg, 0).await;
    tg.push_button_press(USER, USER, qid, &deny);
    until(10, || llm.request_count() >= 2).await;
    let result = llm.requests()[1].last_tool_result();
    assert_eq!(
        result,
        "denied: denied by the person; the tool was not called"
    );
    assert!(!proposed(data.path(), "first"));

    // Nobody answers: after `approvals.timeout_secs` the call is denied.
    let before = tg.calls("sendmessage").len();
    llm.push(Step::ToolCall("skill_manage".into(), create_args("second")));
    tg.push_private_text(USER, USER, "make the second skill");
    wait_question(&tg, before).await;
    until(15, || llm.request_count() >= 4).await;
    let result = llm.requests()[3].last_tool_result();
    assert_eq!(
        result,
        "denied: nobody answered within 2 seconds; the tool was not called"
    );
    assert!(!proposed(data.path(), "second"));
    until(10, || {
        tg.sent_messages()
            .iter()
            .any(|m| m.text.starts_with("reply to: make the second skill"))
    })
    .await;
    app.shutdown().await;
}

#[tokio::test]
async fn the_hardline_asks_even_with_the_bypass_on_and_the_deny_list_never_runs() {
    let (tg, llm, data) = fakes().await;
    std::fs::create_dir_all(data.path().join("skills")).unwrap();
    let mut c = tg_config(&tg, &llm, &data);
    c.approvals.bypass = true;
    c.tools.require_approval = vec!["skill_view".into()];
    // skill_manage matches the floor here; session_search is forbidden outright.
    c.approvals.hardline = vec!["skill_m*".into()];
    c.approvals.deny = vec!["session_search".into()];
    let app = App::start(c).await.unwrap();

    // Bypass: the tool that asks for approval runs without a question.
    llm.push(Step::ToolCall(
        "skill_view".into(),
        r#"{"name": "nope"}"#.into(),
    ));
    tg.push_private_text(USER, USER, "view it");
    until(10, || llm.request_count() >= 2).await;
    assert!(llm.requests()[1]
        .last_tool_result()
        .contains("there is no skill named"));
    assert!(last_question(&tg).is_none());

    // The deny list: refused, never asked.
    llm.push(Step::ToolCall(
        "session_search".into(),
        r#"{"query": "x"}"#.into(),
    ));
    tg.push_private_text(USER, USER, "search");
    until(10, || llm.request_count() >= 4).await;
    assert_eq!(
        llm.requests()[3].last_tool_result(),
        "refused: the operator does not allow the tool \"session_search\"; the tool was not called"
    );
    assert!(last_question(&tg).is_none());

    // The floor: asked even though the bypass is on.
    llm.push(Step::ToolCall("skill_manage".into(), create_args("floor")));
    tg.push_private_text(USER, USER, "make it");
    let (_, text, _, _) = wait_question(&tg, 0).await;
    assert!(text.contains("always asked"), "{text}");
    app.shutdown().await;
}

fn spawn_daemon(
    data: &Path,
    port: u16,
    tg: &FakeTelegram,
    llm: &herald_test_support::fake_llm::FakeLlm,
) -> Running {
    Herald::serve(port, data)
        .fake_model(&llm.base_url())
        .env("HERALD_TELEGRAM__TOKEN", tg.token())
        .env("HERALD_TELEGRAM__API_URL", tg.url())
        .env("HERALD_TELEGRAM__ALLOWED_USERS", format!("[\"{USER}\"]"))
        .env("HERALD_TELEGRAM__POLL_TIMEOUT_SECS", "1")
        .env("HERALD_TOOLS__REQUIRE_APPROVAL", "[\"skill_manage\"]")
        // Asserts unstreamed sends (one message per answer).
        .env("HERALD_STREAMING__ENABLED", "false")
        .fast_leases()
        .env("HERALD_LOG__LEVEL", "warn")
        .spawn()
}

#[tokio::test]
async fn a_sigkill_during_the_wait_resumes_it_without_asking_twice_and_runs_the_call_once() {
    let (tg, llm, data) = fakes().await;
    std::fs::create_dir_all(data.path().join("skills")).unwrap();
    let port = herald_test_support::harness::free_port();
    // The first attempt and the retried one ask for the same call.
    llm.push(Step::ToolCall("skill_manage".into(), create_args("crashy")));
    llm.push(Step::ToolCall("skill_manage".into(), create_args("crashy")));
    let mut first = spawn_daemon(data.path(), port, &tg, &llm);
    tg.push_private_text(USER, USER, "make a crashy skill");
    let (qid, _, approve, _) = wait_question(&tg, 0).await;
    herald_test_support::harness::approval_questions_recorded(data.path(), 1).await;
    first.kill();

    let mut second = spawn_daemon(data.path(), port, &tg, &llm);
    // The retried turn reaches the same call and resumes the wait: no second question.
    until(30, || llm.request_count() >= 2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(tg.questions().len(), 1, "the person was asked twice");
    assert!(!proposed(data.path(), "crashy"));

    tg.push_button_press(USER, USER, qid, &approve);
    until(30, || llm.request_count() >= 3).await;
    let result = llm.requests()[2].last_tool_result();
    assert!(result.contains("herald skills approve crashy"), "{result}");
    assert!(proposed(data.path(), "crashy"));
    until(30, || {
        tg.sent_messages()
            .iter()
            .any(|m| m.text.starts_with("reply to: make a crashy skill"))
    })
    .await;
    herald_test_support::harness::quiet_at(data.path()).await;
    let replies = tg
        .sent_messages()
        .iter()
        .filter(|m| m.text.starts_with("reply to: make a crashy skill"))
        .count();
    assert_eq!(replies, 1);
    second.kill();
}

#[tokio::test]
async fn the_web_chat_answers_its_own_approvals_and_no_other_conversations() {
    use herald_test_support::harness::{init, test_config, Client};
    init();
    let llm = herald_test_support::fake_llm::FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("skills")).unwrap();
    let mut c = test_config(&llm, &data);
    c.tools.require_approval = vec!["skill_manage".into()];
    let app = App::start(c).await.unwrap();
    let client = Client::new(&app);
    let http = reqwest::Client::new();

    llm.push(Step::ToolCall("skill_manage".into(), create_args("webby")));
    let chat = {
        let client = Client::new(&app);
        tokio::spawn(async move { client.chat("web:alice", "make a web skill").await })
    };
    let pending = || async {
        let r = http
            .get(format!("{}/api/v1/lanes/web:alice/approvals", client.base))
            .send()
            .await
            .unwrap();
        r.json::<Value>().await.unwrap()["approvals"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let id = loop {
        if let Some(a) = pending().await.first() {
            assert_eq!(a["tool"], "skill_manage");
            break a["id"].as_str().unwrap().to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no pending approval");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Another conversation sees none of it and cannot answer it.
    let other = http
        .get(format!(
            "{}/api/v1/lanes/web:mallory/approvals",
            client.base
        ))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(other["approvals"], json!([]));
    let answer = |lane: &'static str| {
        let http = http.clone();
        let url = format!("{}/api/v1/approvals/{id}", client.base);
        async move {
            let r = http
                .post(url)
                .json(&json!({"lane": lane, "approve": true}))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = answer("web:mallory").await;
    assert_eq!(status, 403, "{body}");
    assert!(!proposed(data.path(), "webby"));
    let (status, body) = answer("web:alice").await;
    assert_eq!((status, body["outcome"].as_str()), (200, Some("approved")));
    let (status, body) = chat.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "reply to: make a web skill");
    assert!(proposed(data.path(), "webby"));
    let (status, _) = answer("web:alice").await;
    assert_eq!(status, 409, "answered once");
    app.shutdown().await;
}

#[tokio::test]
async fn stop_while_waiting_denies_the_request_and_closes_the_question() {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data, 60).await;
    llm.push(Step::ToolCall(
        "skill_manage".into(),
        create_args("stopped"),
    ));
    tg.push_private_text(USER, USER, "make a skill then wait");
    let (qid, _, approve, _) = wait_question(&tg, 0).await;
    // /stop after the question's id is recorded: a /stop between the send and the record
    // closes the request but cannot edit a question it has no id for (a known window).
    herald_test_support::harness::approval_questions_recorded(data.path(), 1).await;
    tg.push_private_text(USER, USER, "/stop");
    until(10, || {
        tg.calls("editmessagetext").iter().any(|e| {
            e["message_id"] == json!(qid)
                && e["text"].as_str().unwrap_or("").starts_with("⏹ Stopped")
        })
    })
    .await;
    tg.push_button_press(USER, USER, qid, &approve);
    until(10, || !tg.calls("answercallbackquery").is_empty()).await;
    assert_eq!(
        tg.calls("answercallbackquery")[0]["text"],
        "This request is no longer open."
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!proposed(data.path(), "stopped"));
    assert_eq!(
        llm.request_count(),
        1,
        "the stopped turn made no further call"
    );
    app.shutdown().await;
}
