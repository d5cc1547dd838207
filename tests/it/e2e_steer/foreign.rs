//! A group member's correction joins someone else's turn, but never their rights: once another
//! person's words are in the turn, a tool call that is not read-only runs only if the turn's
//! own person approves it. Here nobody answers, so the call is denied and never runs.

use std::time::Duration;

use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{quiet, wait_until};
use herald_test_support::mcp::stdio_server;
use herald_test_support::telegram::{fakes, USER};

use super::{start_with, WAIT};
use herald_test_support::db::Db;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_correction_makes_every_writing_call_ask_the_turns_person() {
    let db = Db::Sqlite;
    let (tg, llm, data): (_, FakeLlm, _) = fakes().await;
    let g: i64 = -100_778;
    let other: i64 = 1002;
    let starts = data.path().join("starts").display().to_string();
    let app = start_with(&tg, &llm, &data, &db, |c| {
        c.telegram.free_response_chats = vec![g.to_string()];
        c.telegram.allowed_users.push(other.to_string());
        c.approvals.timeout_secs = 2;
        c.mcp.servers = vec![stdio_server("shop", "normal", &["--starts", &starts])];
    })
    .await;
    wait_until("the MCP server lists its tools", WAIT, || async {
        std::fs::read_to_string(&starts).is_ok_and(|s| s.lines().count() >= 1)
    })
    .await;
    llm.push(Step::Delay(
        Duration::from_secs(3),
        Box::new(Step::Reply("cancelled".into())),
    ));
    llm.push(Step::ToolCall(
        "shop__shout".into(),
        r#"{"text":"post this as them"}"#.into(),
    ));
    tg.push_group_text(g, USER, "summarise the thread", None);
    wait_until("the model call to start", WAIT, || async {
        llm.request_count() >= 1
    })
    .await;
    tg.push_group_text(g, other, "and shout 'post this as them'", None);
    wait_until("the turn to end", WAIT, || async {
        llm.request_count() >= 3
    })
    .await;
    quiet(&*app.store).await;
    // The turn's person was asked (nobody answered), and the tool never ran.
    let asked: Vec<_> = tg
        .sent_messages()
        .into_iter()
        .filter(|m| !m.buttons.is_empty())
        .collect();
    assert_eq!(asked.len(), 1, "one approval question: {asked:?}");
    assert!(asked[0].text.contains("shout"), "{}", asked[0].text);
    let results = llm.requests()[2].messages().to_vec();
    let tool = results
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(!tool.contains("POST THIS AS THEM"), "the call ran: {tool}");
    app.shutdown().await;
}
