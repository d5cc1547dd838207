//! Several agents in one gateway (issue 49), through the real core with the fake model: a group
//! and a DM of the same person reach different agents (their model, prompt and tools as the
//! model endpoint receives them), a person binding wins over a platform one, each agent keeps
//! its own memory, sessions and capsules, `/agent` lists and switches in a private chat, and a
//! reload moves a chat to another agent while a turn in flight ends on its old one.

use std::time::Duration;

use herald::app::App;
use herald::config::{AgentSpec, Binding, Config, Person, ToolFilter};
use herald::domain::{LaneKey, SessionId};
use herald_test_support::db::Db;
use herald_test_support::fake_llm::{FakeLlm, Recorded, Step};
use herald_test_support::fake_telegram::{message_json, BOT_USERNAME};
use herald_test_support::handoff::LABEL;
use herald_test_support::harness::{init, test_config, wait_until, Client};
use herald_test_support::on_each_backend;
use herald_test_support::telegram::{fakes, tg_config, USER};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);
const GROUP: i64 = -100_490;
const CAPSULE: &str = "## Working on\nTeaching the parser to read dotted keys.\n\n\
## State\nDotted keys parse; arrays of tables do not yet.\n\n\
## Decisions\nKeep one error type per layer.\n\n\
## Pointers\nThe parser lives in toml.rs.\n\n\
## Next\nWrite the arrays-of-tables case.\n";
const CAPSULE_B: &str = "## Working on\nPlanning the picnic on Saturday.\n\n\
## State\nThe park is booked; food is not settled.\n\n\
## Decisions\nEveryone brings one dish.\n\n\
## Pointers\nThe booking mail came on Monday.\n\n\
## Next\nAsk who brings dessert.\n";

fn agent(name: &str, model: &str, prompt: &str) -> AgentSpec {
    AgentSpec {
        name: name.into(),
        description: Some(format!("the {name} helper")),
        model: Some(model.into()),
        system_message: Some(prompt.into()),
        switchable: true,
        ..AgentSpec::default()
    }
}

fn bind(agent: &str, f: impl FnOnce(&mut Binding)) -> Binding {
    let mut b = Binding {
        agent: agent.into(),
        ..Binding::default()
    };
    f(&mut b);
    b
}

/// The requests of the turn answering the user message that contains `needle`.
fn turn(llm: &FakeLlm, needle: &str) -> Vec<Recorded> {
    let r: Vec<Recorded> = llm
        .requests()
        .into_iter()
        .filter(|r| r.last_user().contains(needle))
        .collect();
    assert!(!r.is_empty(), "no model request for {needle:?}");
    r
}

fn model(r: &Recorded) -> String {
    r.body["model"].as_str().unwrap_or_default().to_string()
}

fn sorted_tools(r: &Recorded) -> Vec<String> {
    let mut t = r.tools();
    t.sort();
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_and_a_dm_of_one_person_reach_different_agents() {
    let (tg, llm, data) = fakes().await;
    let mut c = tg_config(&tg, &llm, &data);
    c.people = vec![Person {
        name: "owner".into(),
        ids: vec![format!("telegram:{USER}")],
    }];
    let mut family = agent("family", "family-model", "You are the FAMILY helper.");
    family.tools = ToolFilter {
        allow: Vec::new(),
        deny: vec!["attach_file".into(), "session_search".into()],
    };
    let mut coder = agent("coder", "coder-model", "You are the CODING helper.");
    coder.tools.allow = vec!["session_search".into(), "memory".into()];
    c.agents = vec![family, coder];
    // The platform binding sends everything on Telegram to the family agent; the person
    // binding, more specific, sends the owner's private chat to the coder.
    c.bindings = vec![
        bind("family", |b| b.platform = Some("telegram".into())),
        bind("coder", |b| {
            b.person = Some("owner".into());
            b.chat_type = Some("private".into());
        }),
    ];
    let _app = App::start(c).await.expect("app starts");
    let fact =
        json!({"action": "add", "target": "user", "content": "Owner's picnic is on Saturday"})
            .to_string();

    llm.push_when(
        "FAMILY hello",
        Step::ToolCall("memory".into(), fact.clone()),
    );
    llm.push_when("FAMILY hello", Step::Reply("Noted for the family.".into()));
    let mention = format!("@{BOT_USERNAME}");
    tg.push_group_text(
        GROUP,
        USER,
        &format!("{mention} FAMILY hello"),
        Some(&mention),
    );
    wait_until("the group's answer", WAIT, || async {
        tg.chat_view(GROUP)
            .iter()
            .any(|m| m.text == "Noted for the family.")
    })
    .await;

    llm.push_when("CODER hello", Step::ToolCall("memory".into(), fact.clone()));
    llm.push_when("CODER hello", Step::Reply("Noted for the code.".into()));
    tg.push_message(|id| message_json(id, USER, USER, "CODER hello"));
    wait_until("the DM's answer", WAIT, || async {
        tg.chat_view(USER)
            .iter()
            .any(|m| m.text == "Noted for the code.")
    })
    .await;

    for r in turn(&llm, "FAMILY hello") {
        assert_eq!(model(&r), "family-model");
        assert!(r.system().contains("You are the FAMILY helper."));
        let tools = r.tools();
        assert!(tools.contains(&"memory".to_string()), "{tools:?}");
        assert!(!tools
            .iter()
            .any(|t| t == "attach_file" || t == "session_search"));
    }
    for r in turn(&llm, "CODER hello") {
        assert_eq!(model(&r), "coder-model");
        assert!(r.system().contains("You are the CODING helper."));
        assert!(!r.system().contains("FAMILY"));
        assert_eq!(sorted_tools(&r), ["memory", "session_search"]);
        // The family agent's memory of the owner is not the coder's.
        assert!(!r.system().contains("picnic"), "{}", r.system());
    }
    // Each agent saved the fact in its own files: the coder's save was no duplicate.
    let saved = |needle: &str| llm.tool_results_for(needle)[0].clone();
    assert!(!saved("FAMILY hello").contains("already saved"));
    assert!(
        !saved("CODER hello").contains("already saved"),
        "{}",
        saved("CODER hello")
    );
    for a in ["family", "coder"] {
        let user = data.path().join(format!("agents/{a}/memory/owner/USER.md"));
        let text = std::fs::read_to_string(&user).unwrap_or_default();
        assert!(text.contains("picnic"), "{a}: {text:?}");
    }

    // `/agent` is for private chats.
    tg.push_message(|id| {
        let mut m = message_json(id, GROUP, USER, "/agent");
        m["entities"] = json!([{ "type": "bot_command", "offset": 0, "length": 6 }]);
        m
    });
    wait_until("the group's /agent answer", WAIT, || async {
        tg.chat_view(GROUP)
            .iter()
            .any(|m| m.text.contains("/agent works in private chats"))
    })
    .await;
}

async fn say(client: &Client, lane: &str, text: &str) -> String {
    let (status, body) = client.chat(lane, text).await;
    assert_eq!(status, 200, "{body}");
    body["reply"].as_str().unwrap_or_default().to_string()
}

fn switch_config(llm: &FakeLlm, data: &tempfile::TempDir, db: &Db) -> Config {
    let mut c = test_config(llm, data);
    db.apply(&mut c);
    let mut hidden = agent("hidden", "hidden-model", "HIDDEN");
    hidden.switchable = false;
    let mut other = agent("other", "other-model", "OTHER");
    other.people = vec!["web:someone-else".into()];
    c.agents = vec![
        agent("coder", "coder-model", "You are the CODING helper."),
        agent("family", "family-model", "You are the FAMILY helper."),
        hidden,
        other,
    ];
    c.bindings = vec![bind("coder", |b| b.platform = Some("web".into()))];
    c
}

async fn wait_closed(app: &App, lane: &LaneKey, old: &SessionId) {
    wait_until("the session to close", WAIT, || async {
        app.store
            .session_current(lane)
            .await
            .unwrap()
            .is_none_or(|s| &s.id != old)
    })
    .await;
}

on_each_backend!(
    sqlite_agent_switching_keeps_sessions_and_capsules_apart,
    postgres_agent_switching_keeps_sessions_and_capsules_apart,
    switching
);

async fn switching(db: Db) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(switch_config(&llm, &data, &db)).await.unwrap();
    let client = Client::new(&app);
    let (name, lane) = ("d", LaneKey::new("web:d"));
    say(&client, name, "ZEBRA crossing one").await;
    say(&client, name, "ZEBRA crossing two").await;
    assert_eq!(model(&llm.last_request()), "coder-model");

    // The list: what this person may use, the current one marked; nothing else.
    let list = say(&client, name, "/agent").await;
    assert!(
        list.contains("• coder (current) — the coder helper"),
        "{list}"
    );
    assert!(list.contains("• family — the family helper") && list.contains("• default"));
    assert!(
        !list.contains("hidden") && !list.contains("other"),
        "{list}"
    );
    for refused in ["hidden", "other", "nosuch"] {
        let said = say(&client, name, &format!("/agent {refused}")).await;
        assert!(said.contains("nothing changed"), "{said}");
    }
    say(&client, name, "ZEBRA still here").await;
    assert_eq!(model(&llm.last_request()), "coder-model");

    // A capsule made with the coder waits for the coder: the family agent never sees it.
    let coder_session = app.store.session_current(&lane).await.unwrap().unwrap().id;
    llm.push(Step::Reply(CAPSULE.into()));
    say(&client, name, "handoff").await;
    wait_closed(&app, &lane, &coder_session).await;
    let said = say(&client, name, "/agent family").await;
    assert!(said.starts_with("Switched to family"), "{said}");
    say(&client, name, "FAMILY first").await;
    let first = llm.last_request();
    assert_eq!(model(&first), "family-model");
    assert!(first.system().contains("You are the FAMILY helper."));
    assert!(!first.last_user().contains(LABEL), "{}", first.last_user());

    // The family agent's search does not reach the coder's sessions in the same chat.
    let search = json!({"query": "ZEBRA"}).to_string();
    llm.push_when(
        "FAMILY search",
        Step::ToolCall("session_search".into(), search.clone()),
    );
    llm.push_when("FAMILY search", Step::Reply("Nothing found.".into()));
    say(&client, name, "FAMILY search").await;
    let nothing = llm.tool_results_for("FAMILY search");
    assert!(
        nothing.len() == 1 && nothing[0].contains(r#""results":[]"#),
        "{nothing:?}"
    );

    // Back to the coder: its capsule was kept for it, and its search finds its own sessions.
    let said = say(&client, name, "/agent coder").await;
    assert!(said.starts_with("Switched to coder"), "{said}");
    say(&client, name, "CODER back").await;
    let back = llm.last_request();
    assert_eq!(model(&back), "coder-model");
    assert!(back.last_user().contains(LABEL), "{}", back.last_user());
    assert!(back
        .last_user()
        .contains("Teaching the parser to read dotted keys"));
    llm.push_when(
        "CODER search",
        Step::ToolCall("session_search".into(), search),
    );
    llm.push_when("CODER search", Step::Reply("Found it.".into()));
    say(&client, name, "CODER search").await;
    let found = &llm.tool_results_for("CODER search")[0];
    assert!(found.contains("ZEBRA"), "{found}");

    // A switch with an open session carries it over to the new agent as a capsule.
    let open = app.store.session_current(&lane).await.unwrap().unwrap();
    llm.push(Step::Reply(CAPSULE_B.into()));
    let said = say(&client, name, "/agent family").await;
    assert!(said.contains("with a handoff note"), "{said}");
    let closed = app.store.session_get(&open.id).await.unwrap().unwrap();
    assert_eq!(closed.end_reason.as_deref(), Some("agent"));
    say(&client, name, "FAMILY again").await;
    let again = llm.last_request();
    assert_eq!(model(&again), "family-model");
    assert!(again
        .last_user()
        .contains("Planning the picnic on Saturday"));
    app.shutdown().await;
}

on_each_backend!(
    sqlite_a_reload_moves_a_chat_to_another_agent,
    postgres_a_reload_moves_a_chat_to_another_agent,
    reload_moves
);

async fn reload_moves(db: Db) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = switch_config(&llm, &data, &db);
    c.bindings = vec![bind("coder", |b| b.chat = Some("r".into()))];
    let app = App::start(c.clone()).await.unwrap();
    let client = Client::new(&app);
    llm.push_when(
        "slow question",
        Step::Delay(
            Duration::from_secs(2),
            Box::new(Step::Reply("slow answer".into())),
        ),
    );
    let asked = {
        let client = Client::new(&app);
        tokio::spawn(async move { say(&client, "r", "slow question").await })
    };
    wait_until("the slow turn to reach the model", WAIT, || async {
        llm.request_count() == 1
    })
    .await;
    let mut next = c.clone();
    next.bindings = vec![bind("family", |b| b.chat = Some("r".into()))];
    let report = app.reload.apply(next).await.expect("a valid reload");
    assert!(report.restart_needed.is_empty(), "{report:?}");
    // The turn in flight ends on the agent it started with.
    assert_eq!(asked.await.unwrap(), "slow answer");
    assert_eq!(model(&llm.requests()[0]), "coder-model");
    // The next one runs on the new agent, in a new session, with no restart.
    say(&client, "r", "after the reload").await;
    let after = llm.last_request();
    assert_eq!(model(&after), "family-model");
    assert!(after.system().contains("You are the FAMILY helper."));
    app.shutdown().await;
}
