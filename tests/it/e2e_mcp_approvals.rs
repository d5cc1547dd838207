//! A destructive MCP tool behind the approval gate, end to end: the real test MCP server
//! (`shop_server.py`, whose `delete_order` appends to a state file, so real executions are
//! counted), the real teloxide client against the fake Bot API, the person's buttons. The
//! hardline floor asks for `*delete*` tools with no other setting.

use std::path::Path;
use std::time::Duration;

use herald::app::App;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::FakeTelegram;
use herald_test_support::harness::wait_until;
use herald_test_support::herald::{write_config, Herald, Running};
use herald_test_support::mcp::stdio_server;
use herald_test_support::telegram::{fakes, tg_config, TOKEN, USER};

const WAIT: Duration = Duration::from_secs(30);

async fn until(what: &str, cond: impl Fn() -> bool) {
    wait_until(what, WAIT, || {
        let ok = cond();
        async move { ok }
    })
    .await;
}

fn executions(state: &Path) -> usize {
    std::fs::read_to_string(state)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// The questions (messages with buttons) the bot sent: (message id, text, approve, deny).
fn questions(tg: &FakeTelegram) -> Vec<(i64, String, String, String)> {
    tg.questions()
        .into_iter()
        .map(|q| (q.message_id, q.text, q.approve, q.deny))
        .collect()
}

const DELETE: &str = "shop__delete_order";
const ARGS: &str = r#"{"id":"A-1001"}"#;

#[tokio::test]
async fn a_destructive_mcp_call_asks_never_runs_when_denied_and_runs_once_when_approved() {
    let (tg, llm, data) = fakes().await;
    let state = data.path().join("deleted");
    let starts = data.path().join("starts");
    let mut c = tg_config(&tg, &llm, &data);
    c.mcp.servers = vec![stdio_server(
        "shop",
        "normal",
        &[
            "--state",
            &state.display().to_string(),
            "--starts",
            &starts.display().to_string(),
        ],
    )];
    let app = App::start(c).await.expect("app starts");
    until("the shop lists its tools", || starts.exists()).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Denied: the server never sees the call.
    llm.push(Step::ToolCall(DELETE.into(), ARGS.into()));
    tg.push_private_text(USER, USER, "delete order A-1001");
    until("a question", || questions(&tg).len() == 1).await;
    let (qid, text, _, deny) = questions(&tg)[0].clone();
    assert!(text.contains(DELETE) && text.contains("A-1001"), "{text}");
    assert!(
        text.contains("always asked"),
        "the hardline floor asks: {text}"
    );
    // Someone who may not talk to the agent presses first: nothing happens.
    tg.push_button_press(USER, 4242, qid, &questions(&tg)[0].2);
    until("the stranger's press answered", || {
        !tg.calls("answercallbackquery").is_empty()
    })
    .await;
    assert_eq!(
        tg.calls("answercallbackquery")[0]["text"],
        "You cannot answer this request."
    );
    tg.push_button_press(USER, USER, qid, &deny);
    until("the model hears the answer", || llm.request_count() >= 2).await;
    assert_eq!(
        llm.requests()[1].last_tool_result(),
        "denied: denied by the person; the tool was not called"
    );
    assert_eq!(executions(&state), 0, "a denied call reached the server");

    // Approved: it runs exactly once and the model sees the server's real result.
    llm.push(Step::ToolCall(DELETE.into(), ARGS.into()));
    tg.push_private_text(USER, USER, "delete it after all");
    until("a second question", || questions(&tg).len() == 2).await;
    let (qid, _, approve, _) = questions(&tg)[1].clone();
    tg.push_button_press(USER, USER, qid, &approve);
    until("the model hears the result", || llm.request_count() >= 4).await;
    assert_eq!(llm.requests()[3].last_tool_result(), "deleted order A-1001");
    until("the reply", || {
        tg.sent_messages()
            .iter()
            .any(|m| m.text == "reply to: delete it after all")
    })
    .await;
    assert_eq!(executions(&state), 1);
    app.shutdown().await;
}

fn spawn(file: &Path, port: u16) -> Running {
    Herald::serve_config(file, port)
        .fast_leases()
        .env("HERALD_LOG__LEVEL", "warn")
        .spawn()
}

#[tokio::test]
async fn a_sigkill_while_an_mcp_call_waits_for_approval_never_runs_it_twice() {
    let (tg, llm, data) = fakes().await;
    let state = data.path().join("deleted");
    let starts = data.path().join("starts");
    let port = herald_test_support::harness::free_port();
    let extra = format!(
        "[telegram]\ntoken = {TOKEN:?}\napi_url = {tg_url:?}\nallowed_users = [\"{USER}\"]\n\
         poll_timeout_secs = 1\n\n[streaming]\nenabled = false\n\n\
         [[mcp.servers]]\nname = \"shop\"\ncommand = \"python3\"\n\
         args = [{script:?}, \"--mode\", \"normal\", \"--state\", {state:?}, \"--starts\", {starts:?}]\n",
        tg_url = tg.url(),
        script = herald_test_support::mcp::script().display().to_string(),
        state = state.display().to_string(),
        starts = starts.display().to_string(),
    );
    let file = write_config(
        data.path(),
        &format!("127.0.0.1:{port}"),
        &llm.base_url(),
        &extra,
    );
    // The first attempt and its retry after the crash ask for the same call.
    llm.push(Step::ToolCall(DELETE.into(), ARGS.into()));
    llm.push(Step::ToolCall(DELETE.into(), ARGS.into()));
    let mut first = spawn(&file, port);
    // The shop connects in the background; ask once its tools are offered.
    until_offered(&llm, &tg, &mut first, &starts).await;
    let (qid, _, approve, _) = questions(&tg)[0].clone();
    herald_test_support::harness::approval_questions_recorded(data.path(), 1).await;
    first.kill();

    let mut second = spawn(&file, port);
    until("the retried turn reaches the call", || {
        llm.request_count() >= 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(questions(&tg).len(), 1, "the person was asked twice");
    assert_eq!(executions(&state), 0);
    tg.push_button_press(USER, USER, qid, &approve);
    until("the model hears the result", || llm.request_count() >= 3).await;
    assert_eq!(llm.requests()[2].last_tool_result(), "deleted order A-1001");
    until("the reply", || {
        tg.sent_messages()
            .iter()
            .any(|m| m.text == "reply to: delete order A-1001")
    })
    .await;
    herald_test_support::harness::quiet_at(data.path()).await;
    assert_eq!(
        executions(&state),
        1,
        "the approved call ran more than once"
    );
    let replies = tg
        .sent_messages()
        .iter()
        .filter(|m| m.text == "reply to: delete order A-1001")
        .count();
    assert_eq!(replies, 1);
    second.kill();
}

/// Sends the request once the daemon offers the shop's tools (a request before the server
/// connected would not see them), and waits for the question.
async fn until_offered(llm: &FakeLlm, tg: &FakeTelegram, child: &mut Running, starts: &Path) {
    until("the daemon polls Telegram", || {
        !tg.calls("getupdates").is_empty()
    })
    .await;
    until("the shop lists its tools", || starts.exists()).await;
    assert!(child.try_wait().is_none(), "the daemon exited");
    tokio::time::sleep(Duration::from_millis(300)).await;
    tg.push_private_text(USER, USER, "delete order A-1001");
    until("a question", || questions(tg).len() == 1).await;
    let offered = llm.requests()[0].body["tools"].to_string();
    assert!(offered.contains(DELETE), "{offered}");
}
