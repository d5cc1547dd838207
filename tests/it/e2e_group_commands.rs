//! Issue 52, part 6: in a Telegram group `/stop` and `/new` act only on the sender's own turn
//! and session, unless the sender is listed in `approvals.admins`. A member's `/stop` of
//! another's turn (here a turn waiting on its approval question) is refused at once, and that
//! turn still finishes and is answered; the member's own `/stop` and an admin's work. A member's
//! `/new` of a session others spoke in is refused; of a session that is only theirs, and an
//! admin's, it starts a new one.

use std::time::Duration;

use herald::app::App;
use herald::domain::{LaneKey, SessionId};
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::{message_json, FakeTelegram, BOT_USERNAME};
use herald_test_support::harness::wait_until;
use herald_test_support::telegram::{fakes, tg_config, USER};
use serde_json::json;

const GROUP: i64 = -100_778;
/// Another allowed member, and an admin (`approvals.admins`).
const OTHER: i64 = 2002;
const ADMIN: i64 = 3003;

const STOP_REFUSED: &str = "Only the person whose turn this is, or an admin, can stop it.";
const NEW_REFUSED: &str = "only an admin can start a new one";

async fn start() -> (FakeTelegram, FakeLlm, tempfile::TempDir, App) {
    let (tg, llm, data) = fakes().await;
    std::fs::create_dir_all(data.path().join("skills")).unwrap();
    let mut c = tg_config(&tg, &llm, &data);
    c.tools.require_approval = vec!["skill_manage".into()];
    c.telegram
        .allowed_users
        .extend([OTHER.to_string(), ADMIN.to_string()]);
    c.approvals.admins = vec![format!("telegram:{ADMIN}")];
    let app = App::start(c).await.expect("app starts");
    (tg, llm, data, app)
}

/// Texts the bot sent to the group, in order.
fn said(tg: &FakeTelegram) -> Vec<String> {
    tg.sent_messages()
        .into_iter()
        .filter(|m| m.chat_id == GROUP)
        .map(|m| m.text)
        .collect()
}

async fn until_said(tg: &FakeTelegram, needle: &str, times: usize) {
    wait_until(
        &format!("{times} group message(s) with {needle:?}"),
        Duration::from_secs(20),
        || async { said(tg).iter().filter(|t| t.contains(needle)).count() >= times },
    )
    .await;
}

/// A member's message to the bot in the group.
fn to_bot(tg: &FakeTelegram, from: i64, text: &str) {
    let mention = format!("@{BOT_USERNAME}");
    tg.push_group_text(GROUP, from, &format!("{mention} {text}"), Some(&mention));
}

/// A command typed in the group (Telegram marks it as a bot command).
fn command(tg: &FakeTelegram, from: i64, cmd: &str) {
    tg.push_message(|id| {
        let mut m = message_json(id, GROUP, from, cmd);
        m["entities"] = json!([{ "type": "bot_command", "offset": 0, "length": cmd.len() }]);
        m
    });
}

/// The user asks for a skill; their turn waits on the approval question, whose message id
/// and approve button are returned.
async fn waiting_turn(tg: &FakeTelegram, llm: &FakeLlm, name: &str) -> (i64, String) {
    llm.push(Step::ToolCall(
        "skill_manage".into(),
        json!({"action": "create", "name": name, "description": "Sort bug reports",
            "body": "1. Label it."})
        .to_string(),
    ));
    let before = tg.questions().len();
    to_bot(tg, USER, &format!("make a skill {name}"));
    wait_until("the question", Duration::from_secs(20), || async {
        tg.questions().len() > before
    })
    .await;
    let q = tg.questions().pop().unwrap();
    (q.message_id, q.approve)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_group_only_the_turns_owner_or_an_admin_stops_it() {
    let (tg, llm, data, app) = start().await;
    let proposed = |name: &str| {
        data.path()
            .join(format!("skills/.proposed/{name}"))
            .exists()
    };

    // Another member's /stop is refused at once; the user's turn still waits on its question,
    // and once approved it runs the tool and is answered.
    let (qid, approve) = waiting_turn(&tg, &llm, "triage").await;
    llm.push(Step::Reply("The triage skill is proposed.".into()));
    command(&tg, OTHER, "/stop");
    until_said(&tg, STOP_REFUSED, 1).await;
    assert_eq!(llm.request_count(), 1, "the turn is still waiting");
    tg.push_button_press(GROUP, USER, qid, &approve);
    until_said(&tg, "The triage skill is proposed.", 1).await;
    assert!(proposed("triage"), "the approval was not kept");
    assert_eq!(
        tg.calls("answercallbackquery")[0]["text"],
        "Approved.",
        "the refused /stop denied the question"
    );
    assert!(!said(&tg).iter().any(|t| t == "Stopped."));

    // The user's own /stop ends their turn; its question is not run.
    let _ = waiting_turn(&tg, &llm, "second").await;
    command(&tg, USER, "/stop");
    until_said(&tg, "Stopped.", 1).await;

    // So does an admin's /stop of the user's turn.
    let _ = waiting_turn(&tg, &llm, "third").await;
    command(&tg, ADMIN, "/stop");
    until_said(&tg, "Stopped.", 2).await;
    assert!(!proposed("second") && !proposed("third"));
    assert_eq!(
        said(&tg)
            .iter()
            .filter(|t| t.contains(STOP_REFUSED))
            .count(),
        1
    );
    app.shutdown().await;
    tg.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_group_new_resets_only_the_senders_own_session_unless_an_admin_asks() {
    let (tg, _llm, _data, app) = start().await;
    let lane = LaneKey::new(&format!("telegram:{GROUP}"));
    let current = || async {
        app.store
            .session_current(&lane)
            .await
            .unwrap()
            .map(|s| s.id)
    };
    let hello = "hello";
    to_bot(&tg, USER, "hello");
    until_said(&tg, hello, 1).await;
    let first: SessionId = current().await.unwrap();

    // The session is the user's alone: another member may not reset it, the user may.
    command(&tg, OTHER, "/new");
    until_said(&tg, NEW_REFUSED, 1).await;
    assert_eq!(current().await, Some(first.clone()));
    command(&tg, USER, "/new");
    until_said(&tg, "Started a new session.", 1).await;
    assert_eq!(current().await, None);

    // Both spoke in the next one: neither member may reset it, an admin may.
    to_bot(&tg, USER, "hello");
    until_said(&tg, hello, 2).await;
    to_bot(&tg, OTHER, "me too");
    until_said(&tg, "me too", 1).await;
    let shared = current().await.unwrap();
    assert_ne!(shared, first);
    command(&tg, USER, "/new");
    until_said(&tg, NEW_REFUSED, 2).await;
    assert_eq!(current().await, Some(shared));
    command(&tg, ADMIN, "/new");
    until_said(&tg, "Started a new session.", 2).await;
    assert_eq!(current().await, None);
    app.shutdown().await;
    tg.shutdown().await;
}
