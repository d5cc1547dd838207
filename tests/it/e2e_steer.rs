//! Messages that arrive while their conversation's turn runs (`lanes.mid_turn`, issue 32), end
//! to end through the real teloxide client against the fake Bot API and the fake model, on
//! SQLite and on Postgres: a correction joins the running turn and one answer covers both
//! (`steer`), waits for its own turn (`queue`), or stops the turn and starts a new one
//! (`interrupt`); a control word is never merged. The SIGKILL case is in `crash`.

mod crash;
mod foreign;

use std::time::Duration;

use herald::adapters::telegram::format::markdown_to_html;
use herald::app::App;
use herald::config::{Config, MidTurn};
use herald::store::{InboxStatus, StoredMessage};
use herald_test_support::db::Db;
use herald_test_support::fake_llm::{text_of, FakeLlm, Step};
use herald_test_support::fake_telegram::FakeTelegram;
use herald_test_support::harness::{quiet, wait_until};
use herald_test_support::mcp::stdio_server;
use herald_test_support::on_each_backend;
use herald_test_support::telegram::{fakes, tg_config, USER};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);
const CORRECTION: &str = "don't change it yet, check the blast radius first";
/// The preview's line once a correction joined the turn.
const TAKEN: &str = "↪ taking your correction into account";

async fn start(tg: &FakeTelegram, llm: &FakeLlm, data: &tempfile::TempDir, db: &Db) -> App {
    start_with(tg, llm, data, db, |_| {}).await
}

async fn start_with(
    tg: &FakeTelegram,
    llm: &FakeLlm,
    data: &tempfile::TempDir,
    db: &Db,
    edit: impl FnOnce(&mut Config),
) -> App {
    let mut c = tg_config(tg, llm, data);
    db.apply(&mut c);
    edit(&mut c);
    App::start(c).await.expect("app starts")
}

/// What the person sees in their chat: the bot's messages after every edit.
fn chat(tg: &FakeTelegram, chat_id: i64) -> Vec<String> {
    tg.chat_view(chat_id).into_iter().map(|m| m.text).collect()
}

/// Each message as the bytes it was sent as.
fn bytes(ms: &[Value]) -> Vec<String> {
    ms.iter().map(|m| m.to_string()).collect()
}

/// The lane's transcript, role and text of each row.
async fn transcript(app: &App) -> Vec<(String, String)> {
    let sessions = app.store.sessions_list(None, 10).await.unwrap();
    assert_eq!(sessions.len(), 1, "one conversation");
    let rows: Vec<StoredMessage> = app.store.messages(&sessions[0].id, true).await.unwrap();
    rows.into_iter()
        .map(|m| (m.role.as_str().to_string(), m.content))
        .collect()
}

fn rows(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(r, t)| (r.to_string(), t.to_string()))
        .collect()
}

/// The inbox rows of the test's messages: status and the reply row each points at.
async fn inbox(app: &App, ids: std::ops::RangeInclusive<i64>) -> Vec<(InboxStatus, Option<i64>)> {
    let mut out = Vec::new();
    for id in ids {
        let row = app.store.inbox_get(id).await.unwrap().expect("inbox row");
        out.push((row.status, row.reply_message_id));
    }
    out
}

on_each_backend!(
    steer_correction_joins_the_streamed_turn_sqlite,
    steer_correction_joins_the_streamed_turn_postgres,
    steer_correction_joins_the_streamed_turn
);

/// The correction cancels the model call in flight: the words it had shown stay as assistant
/// text, the correction follows as a user message, every earlier message is sent as it was,
/// and the person gets one answer (the preview, edited) that said it took the correction.
async fn steer_correction_joins_the_streamed_turn(db: Db) {
    let (tg, llm, data) = fakes().await;
    let app = start_with(&tg, &llm, &data, &db, |c| {
        c.streaming.enabled = Some(true);
        c.streaming.edit_interval_ms = 200;
    })
    .await;
    let plan = "Changing the config now: first the proxy block, then the upstream list, then the timeouts, then a reload.";
    llm.push(Step::stream(plan, 6, Duration::from_millis(250)));
    let answer = "Not changing anything yet. The blast radius: the proxy and the two upstreams.";
    llm.push(Step::stream(answer, 12, Duration::from_millis(150)));

    tg.push_private_text(USER, USER, "change the config");
    wait_until("the preview shows the plan", WAIT, || async {
        chat(&tg, USER)
            .first()
            .is_some_and(|t| t.contains("Changing"))
    })
    .await;
    tg.push_private_text(USER, USER, CORRECTION);

    wait_until("one answer covers both", WAIT, || async {
        chat(&tg, USER) == [markdown_to_html(answer)]
    })
    .await;
    quiet(&*app.store).await;
    assert_eq!(chat(&tg, USER), [markdown_to_html(answer)]);
    assert_eq!(
        tg.sent_messages().len(),
        1,
        "one message: the preview became the answer"
    );
    let shown: Vec<String> = tg.edits().into_iter().map(|e| e.text).collect();
    assert!(
        shown.iter().any(|t| t.starts_with(TAKEN)),
        "the preview said the correction was taken: {shown:?}"
    );

    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2, "the cancelled call and the answer");
    let (first, second) = (reqs[0].messages(), reqs[1].messages());
    assert_eq!(
        bytes(&second[..first.len()]),
        bytes(first),
        "every earlier message is sent as it was"
    );
    let added = &second[first.len()..];
    assert_eq!(added.len(), 2, "{added:?}");
    assert_eq!(added[0]["role"], "assistant");
    let visible = text_of(&added[0]);
    assert!(
        visible.starts_with("Changing") && plan.starts_with(&visible) && visible != plan,
        "the text shown so far, and only it: {visible:?}"
    );
    assert!(added[0].get("tool_calls").is_none() && added[0].get("reasoning_content").is_none());
    assert_eq!(added[1]["role"], "user");
    assert_eq!(text_of(&added[1]), CORRECTION);

    assert_eq!(
        transcript(&app).await,
        rows(&[
            ("user", "change the config"),
            ("assistant", &visible),
            ("user", CORRECTION),
            ("assistant", answer),
        ])
    );
    let marks = inbox(&app, 1..=2).await;
    assert_eq!(marks[0], marks[1], "both rows answered by the one reply");
    assert_eq!(marks[0].0, InboxStatus::Done);
    assert!(marks[0].1.is_some());
    app.shutdown().await;
}

on_each_backend!(
    steer_correction_joins_between_tool_calls_sqlite,
    steer_correction_joins_between_tool_calls_postgres,
    steer_correction_joins_between_tool_calls
);

/// A correction sent while a tool runs reaches the model right after the tool's result.
async fn steer_correction_joins_between_tool_calls(db: Db) {
    let (tg, llm, data) = fakes().await;
    let starts = data.path().join("starts").display().to_string();
    let app = start_with(&tg, &llm, &data, &db, |c| {
        c.mcp.servers = vec![stdio_server("shop", "normal", &["--starts", &starts])];
    })
    .await;
    wait_until("the MCP server lists its tools", WAIT, || async {
        std::fs::read_to_string(&starts).is_ok_and(|s| s.lines().count() >= 1)
    })
    .await;
    llm.push(Step::ToolCall(
        "shop__slow".into(),
        r#"{"seconds":3}"#.into(),
    ));
    tg.push_private_text(USER, USER, "change the config");
    wait_until("the tool call to be asked for", WAIT, || async {
        llm.request_count() >= 1
    })
    .await;
    tg.push_private_text(USER, USER, CORRECTION);

    let want = format!("reply to: {CORRECTION}");
    wait_until("one answer", WAIT, || async {
        !tg.sent_messages().is_empty()
    })
    .await;
    quiet(&*app.store).await;
    assert_eq!(chat(&tg, USER), [markdown_to_html(&want)]);
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    let (first, second) = (reqs[0].messages(), reqs[1].messages());
    assert_eq!(bytes(&second[..first.len()]), bytes(first));
    let roles: Vec<&str> = second[first.len()..]
        .iter()
        .map(|m| m["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles, ["assistant", "tool", "user"]);
    assert_eq!(text_of(second.last().unwrap()), CORRECTION);
    let marks = inbox(&app, 1..=2).await;
    assert_eq!(marks[0], marks[1]);
    app.shutdown().await;
}

on_each_backend!(
    queue_waits_for_the_next_turn_sqlite,
    queue_waits_for_the_next_turn_postgres,
    queue_waits_for_the_next_turn
);

async fn queue_waits_for_the_next_turn(db: Db) {
    let (tg, llm, data) = fakes().await;
    let app = start_with(&tg, &llm, &data, &db, |c| c.lanes.mid_turn = MidTurn::Queue).await;
    llm.push(Step::Delay(
        Duration::from_secs(2),
        Box::new(Step::Reply("changed it".into())),
    ));
    tg.push_private_text(USER, USER, "change the config");
    wait_until("the model call to start", WAIT, || async {
        llm.request_count() >= 1
    })
    .await;
    tg.push_private_text(USER, USER, CORRECTION);
    tg.wait_for_sent(2, WAIT).await;
    quiet(&*app.store).await;
    let want = [
        "changed it".to_string(),
        markdown_to_html(&format!("reply to: {CORRECTION}")),
    ];
    assert_eq!(chat(&tg, USER), want);
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    // The second turn sees the first one's answer before the correction.
    let second = reqs[1].messages();
    let n = second.len();
    assert_eq!(text_of(&second[n - 2]), "changed it");
    assert_eq!(text_of(&second[n - 1]), CORRECTION);
    let marks = inbox(&app, 1..=2).await;
    assert_ne!(marks[0].1, marks[1].1, "each message its own answer");
    app.shutdown().await;
}

on_each_backend!(
    interrupt_stops_the_turn_and_starts_anew_sqlite,
    interrupt_stops_the_turn_and_starts_anew_postgres,
    interrupt_stops_the_turn_and_starts_anew
);

async fn interrupt_stops_the_turn_and_starts_anew(db: Db) {
    let (tg, llm, data) = fakes().await;
    let app = start_with(&tg, &llm, &data, &db, |c| {
        c.lanes.mid_turn = MidTurn::Interrupt
    })
    .await;
    llm.push(Step::Delay(
        Duration::from_secs(8),
        Box::new(Step::Reply("never sent".into())),
    ));
    tg.push_private_text(USER, USER, "change the config");
    wait_until("the model call to start", WAIT, || async {
        llm.request_count() >= 1
    })
    .await;
    tg.push_private_text(USER, USER, CORRECTION);
    tg.wait_for_sent(1, WAIT).await;
    quiet(&*app.store).await;
    let want = markdown_to_html(&format!("reply to: {CORRECTION}"));
    assert_eq!(chat(&tg, USER), [want], "only the new turn answers");
    assert_eq!(tg.sent_messages().len(), 1);
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    // The new turn has the stopped one's message in its history, unanswered.
    let second = reqs[1].messages();
    let n = second.len();
    assert_eq!(text_of(&second[n - 2]), "change the config");
    assert_eq!(text_of(&second[n - 1]), CORRECTION);
    assert_eq!(
        transcript(&app).await,
        rows(&[
            ("user", "change the config"),
            ("user", CORRECTION),
            ("assistant", &format!("reply to: {CORRECTION}")),
        ])
    );
    app.shutdown().await;
}

on_each_backend!(
    control_words_are_never_merged_sqlite,
    control_words_are_never_merged_postgres,
    control_words_are_never_merged
);

/// `/status` mid-turn is answered on its own and the turn goes on undisturbed; `/stop` stops it
/// rather than joining it.
async fn control_words_are_never_merged(db: Db) {
    let (tg, llm, data) = fakes().await;
    let app = start(&tg, &llm, &data, &db).await;
    llm.push(Step::Delay(
        Duration::from_secs(3),
        Box::new(Step::Reply("the slow answer".into())),
    ));
    tg.push_private_text(USER, USER, "think slowly");
    wait_until("the model call to start", WAIT, || async {
        llm.request_count() >= 1
    })
    .await;
    tg.push_private_text(USER, USER, "/status");
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert!(sent[0].text.starts_with("Session "), "{}", sent[0].text);
    assert_eq!(sent[1].text, "the slow answer");
    quiet(&*app.store).await;
    assert_eq!(llm.request_count(), 1, "/status never reached the model");

    llm.push(Step::Delay(
        Duration::from_secs(8),
        Box::new(Step::Reply("never sent".into())),
    ));
    tg.push_private_text(USER, USER, "think slowly again");
    wait_until("the second model call to start", WAIT, || async {
        llm.request_count() >= 2
    })
    .await;
    tg.push_private_text(USER, USER, "/stop");
    let sent = tg.wait_for_sent(3, WAIT).await;
    assert_eq!(sent[2].text, "Stopped.");
    quiet(&*app.store).await;
    assert_eq!(tg.sent_messages().len(), 3);
    assert_eq!(llm.request_count(), 2, "/stop never reached the model");
    app.shutdown().await;
}

on_each_backend!(
    group_member_correction_says_who_wrote_it_sqlite,
    group_member_correction_says_who_wrote_it_postgres,
    group_member_correction_says_who_wrote_it
);

async fn group_member_correction_says_who_wrote_it(db: Db) {
    let (tg, llm, data) = fakes().await;
    let g: i64 = -100_777;
    let other: i64 = 1002;
    let app = start_with(&tg, &llm, &data, &db, |c| {
        c.telegram.free_response_chats = vec![g.to_string()];
        c.telegram.allowed_users.push(other.to_string());
    })
    .await;
    llm.push(Step::Delay(
        Duration::from_secs(3),
        Box::new(Step::Reply("cancelled".into())),
    ));
    tg.push_group_text(g, USER, "change the config", None);
    wait_until("the model call to start", WAIT, || async {
        llm.request_count() >= 1
    })
    .await;
    tg.push_group_text(g, other, "wait, I am deploying", None);
    tg.wait_for_sent(1, WAIT).await;
    quiet(&*app.store).await;
    assert_eq!(tg.sent_messages().len(), 1, "one answer");
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 2);
    let last = text_of(reqs[1].messages().last().unwrap());
    assert!(
        last.ends_with("wrote: wait, I am deploying") && last.contains(&other.to_string()),
        "says who wrote it: {last:?}"
    );
    app.shutdown().await;
}

on_each_backend!(
    steer_leaves_messages_queued_before_the_turn_sqlite,
    steer_leaves_messages_queued_before_the_turn_postgres,
    steer_leaves_messages_queued_before_the_turn
);

/// Messages already waiting when a turn starts were not sent during it: each gets its own turn
/// and answer, in order, even with `steer`.
async fn steer_leaves_messages_queued_before_the_turn(db: Db) {
    let (tg, llm, data) = fakes().await;
    tg.push_private_text(USER, USER, "first");
    tg.push_private_text(USER, USER, "second");
    let app = start(&tg, &llm, &data, &db).await;
    tg.wait_for_sent(2, WAIT).await;
    quiet(&*app.store).await;
    assert_eq!(chat(&tg, USER), ["reply to: first", "reply to: second"]);
    assert_eq!(llm.request_count(), 2);
    app.shutdown().await;
}
