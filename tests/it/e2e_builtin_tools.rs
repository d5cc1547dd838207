//! The built-in `cron` and `send_message` tools end to end, over the real teloxide client and
//! the fake Bot API: the fake model calls them from a chat, and the test looks at what the
//! people in the chats would see (sent messages), what the model was told (tool results) and
//! what the store holds (jobs, transcripts).

use std::time::Duration;

use chrono::Utc;
use herald::app::App;
use herald::cli::cron::{execute, CronCmd};
use herald::config::{Config, SendRoute};
use herald::domain::LaneKey;
use serde_json::{json, Value};

use herald_test_support::db::Db;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::{FakeTelegram, SentMessage};
use herald_test_support::harness::{init, test_config, wait_until, Client};
use herald_test_support::telegram::{fakes, tg_config};

const ALICE: i64 = 111;
const BOB: i64 = 999;
const GROUP: i64 = -100555;

fn config(tg: &FakeTelegram, llm: &FakeLlm, data: &tempfile::TempDir, db: &Db) -> Config {
    let mut c = tg_config(tg, llm, data);
    c.telegram.allowed_users = vec![ALICE.to_string(), BOB.to_string()];
    // These tests are about what the tools do once they run: no question before a create,
    // and a chat job may run every 2 s (the floor and the question: `e2e_cron_chat`).
    c.tools.require_approval = Vec::new();
    c.cron.chat_min_interval_secs = 1;
    db.apply(&mut c);
    c
}

fn call(tool: &str, args: Value) -> Step {
    Step::ToolCall(tool.into(), args.to_string())
}

/// Messages the fake Bot API got for `chat` whose text contains `needle`.
fn sent_to(tg: &FakeTelegram, chat: i64, needle: &str) -> Vec<SentMessage> {
    tg.sent_messages()
        .into_iter()
        .filter(|m| m.chat_id == chat && m.text.contains(needle))
        .collect()
}

async fn wait_sent(tg: &FakeTelegram, chat: i64, needle: &str, n: usize) {
    wait_until(
        &format!("{n} message(s) with {needle:?} in chat {chat}"),
        Duration::from_secs(20),
        || async { sent_to(tg, chat, needle).len() >= n },
    )
    .await;
}

/// The transcript of `lane`'s current session, as (role, text).
async fn transcript(app: &App, lane: &str) -> Vec<(String, String)> {
    let Some(session) = app
        .store
        .session_current(&LaneKey::new(lane))
        .await
        .unwrap()
    else {
        return Vec::new();
    };
    app.store
        .messages(&session.id, true)
        .await
        .unwrap()
        .into_iter()
        .map(|m| (m.role.as_str().to_string(), m.content))
        .collect()
}

// ---- cron ----

async fn a_cron_job_made_in_a_chat_delivers_there_and_only_its_chat_manages_it(db: Db) {
    let (tg, llm, data) = fakes().await;
    let config = config(&tg, &llm, &data, &db);
    let app = App::start(config.clone()).await.unwrap();
    let brief = "Write the morning brief.";
    // The first scheduled run tries to schedule more work: refused.
    llm.push_when(
        brief,
        call(
            "cron",
            json!({"action": "create", "name": "more", "schedule": "every 1h", "prompt": "x"}),
        ),
    );
    let ask = "please schedule the morning brief";
    llm.push_when(
        ask,
        call(
            "cron",
            json!({"action": "create", "name": "morning", "schedule": "every 2s", "prompt": brief}),
        ),
    );
    llm.push_when(ask, Step::Reply("Scheduled.".into()));
    tg.push_private_text(ALICE, ALICE, ask);
    wait_sent(&tg, ALICE, "Scheduled.", 1).await;
    let told = llm.tool_results_for(ask);
    assert!(
        told[0].starts_with("added cron job \"morning\""),
        "{told:?}"
    );
    // Two runs delivered into the chat the job was made in (the fake model echoes the prompt).
    wait_sent(&tg, ALICE, brief, 2).await;
    assert!(
        llm.tool_results_for(brief)
            .iter()
            .any(|r| r.contains("a scheduled run cannot schedule more work")),
        "a run scheduled more work"
    );
    assert!(sent_to(&tg, BOB, brief).is_empty());
    let listed = execute(app.store.as_ref(), &config, CronCmd::List, Utc::now())
        .await
        .unwrap();
    assert!(
        listed.contains("telegram_111.morning") && listed.contains("(chat telegram:111)"),
        "{listed}"
    );
    assert!(!listed.contains("more"), "{listed}");

    // Bob's chat: Alice's job does not exist for it; Bob can have his own "morning".
    let bob = "bob tries the morning job";
    for step in [
        call("cron", json!({"action": "list"})),
        call("cron", json!({"action": "pause", "name": "morning"})),
        call("cron", json!({"action": "remove", "name": "morning"})),
        call(
            "cron",
            json!({"action": "create", "name": "morning", "schedule": "every 1h", "prompt": "Bob's brief."}),
        ),
        call("cron", json!({"action": "list"})),
        Step::Reply("Bob done.".into()),
    ] {
        llm.push_when(bob, step);
    }
    tg.push_private_text(BOB, BOB, bob);
    wait_sent(&tg, BOB, "Bob done.", 1).await;
    let told = llm.tool_results_for(bob);
    assert_eq!(told[0], r#"{"jobs":[]}"#);
    for r in &told[1..3] {
        assert_eq!(
            r,
            "error: no cron job named \"morning\" (see action \"list\")"
        );
    }
    assert!(
        told[3].starts_with("added cron job \"morning\""),
        "{told:?}"
    );
    let jobs: Value = serde_json::from_str(&told[4]).unwrap();
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 1, "{jobs}");
    assert_eq!(jobs["jobs"][0]["schedule"], "every 1h");
    let alices = app
        .store
        .cron_job_get("telegram_111.morning")
        .await
        .unwrap()
        .expect("Alice's job is still there");
    assert!(!alices.paused);

    // Alice pauses: no run starts after that.
    let pause = "pause the morning brief";
    llm.push_when(
        pause,
        call("cron", json!({"action": "pause", "name": "morning"})),
    );
    llm.push_when(pause, Step::Reply("Paused.".into()));
    tg.push_private_text(ALICE, ALICE, pause);
    wait_sent(&tg, ALICE, "Paused.", 1).await;
    assert_eq!(
        llm.tool_results_for(pause)[0],
        "paused cron job \"morning\""
    );
    // A run claimed just before the pause may still finish.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let fires = app
        .store
        .cron_fires(Some("telegram_111.morning"), 100)
        .await
        .unwrap()
        .len();
    let delivered = sent_to(&tg, ALICE, brief).len();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        app.store
            .cron_fires(Some("telegram_111.morning"), 100)
            .await
            .unwrap()
            .len(),
        fires,
        "a paused job fired"
    );
    assert_eq!(sent_to(&tg, ALICE, brief).len(), delivered);

    // Alice removes it; Bob's job stays.
    let remove = "remove the morning brief";
    llm.push_when(
        remove,
        call("cron", json!({"action": "remove", "name": "morning"})),
    );
    llm.push_when(remove, Step::Reply("Removed.".into()));
    tg.push_private_text(ALICE, ALICE, remove);
    wait_sent(&tg, ALICE, "Removed.", 1).await;
    assert_eq!(
        llm.tool_results_for(remove)[0],
        "removed cron job \"morning\""
    );
    assert!(app
        .store
        .cron_job_get("telegram_111.morning")
        .await
        .unwrap()
        .is_none());
    assert!(app
        .store
        .cron_job_get("telegram_999.morning")
        .await
        .unwrap()
        .is_some());
    app.shutdown().await;
    tg.shutdown().await;
}

herald_test_support::on_each_backend!(
    cron_job_from_a_chat_sqlite,
    cron_job_from_a_chat_postgres,
    a_cron_job_made_in_a_chat_delivers_there_and_only_its_chat_manages_it
);

// ---- send_message ----

fn routed(mut c: Config) -> Config {
    c.tools.send_message_routes = vec![SendRoute {
        from: format!("telegram:{ALICE}"),
        to: vec![format!("telegram:{GROUP}"), "web:ops".into()],
    }];
    c
}

async fn send_message_posts_once_where_routed_and_allowed(db: Db) {
    let (tg, llm, data) = fakes().await;
    let config = routed(config(&tg, &llm, &data, &db));
    let app = App::start(config.clone()).await.unwrap();

    // Allowed: a route from Alice's chat, and Alice may write in the group herself.
    let ask = "tell the group hello";
    llm.push_when(
        ask,
        call(
            "send_message",
            json!({"to": format!("telegram:{GROUP}"), "text": "Hello group, from Alice's agent."}),
        ),
    );
    llm.push_when(ask, Step::Reply("Told them.".into()));
    tg.push_private_text(ALICE, ALICE, ask);
    wait_sent(&tg, ALICE, "Told them.", 1).await;
    wait_sent(&tg, GROUP, "Hello group", 1).await;
    assert_eq!(
        llm.tool_results_for(ask)[0],
        format!("sent to telegram:{GROUP} (1 message(s))")
    );
    let group = format!("telegram:{GROUP}");
    wait_until(
        "the message mirrored into the group's transcript",
        Duration::from_secs(10),
        || async {
            transcript(&app, &group).await.iter().any(|(role, text)| {
                role == "assistant" && text.contains("Hello group, from Alice's agent.")
            })
        },
    )
    .await;

    // Refused alike: no route to the target; a route, but to a lane Alice cannot write to (a
    // web lane); and Bob, who has no route at all.
    let refusal = "refused: that conversation is not one this conversation may send to; the tool was not called";
    let probe = "try the other chats";
    for to in ["telegram:-100777".to_string(), "web:ops".into()] {
        llm.push_when(
            probe,
            call("send_message", json!({"to": to, "text": "psst"})),
        );
    }
    // Routed and allowed, but what it says cannot go out: a credential, or too long.
    let group_to = format!("telegram:{GROUP}");
    llm.push_when(
        probe,
        call(
            "send_message",
            json!({"to": group_to, "text": "psst: the key is sk-abcdefghijklmnopqrstuvwxyz123456"}),
        ),
    );
    llm.push_when(
        probe,
        call(
            "send_message",
            json!({"to": group_to, "text": format!("psst {}", "x".repeat(4000))}),
        ),
    );
    llm.push_when(probe, Step::Reply("Could not.".into()));
    tg.push_private_text(ALICE, ALICE, probe);
    wait_sent(&tg, ALICE, "Could not.", 1).await;
    assert_eq!(
        llm.tool_results_for(probe),
        [
            refusal,
            refusal,
            "refused: the text contains what looks like a secret (OpenAI-style API key); the tool was not called",
            "error: the text is 4005 characters; the most is 4000",
        ]
    );
    let bob = "bob tells the group";
    llm.push_when(
        bob,
        call(
            "send_message",
            json!({"to": format!("telegram:{GROUP}"), "text": "psst"}),
        ),
    );
    llm.push_when(bob, Step::Reply("Bob could not.".into()));
    tg.push_private_text(BOB, BOB, bob);
    wait_sent(&tg, BOB, "Bob could not.", 1).await;
    assert_eq!(llm.tool_results_for(bob), [refusal]);
    assert!(tg.sent_messages().iter().all(|m| !m.text.contains("psst")));
    assert!(transcript(&app, "web:ops").await.is_empty());

    // A turn cut off after its send_message call and retried after a restart does not send
    // the message again.
    let once = "relay this once";
    let args = json!({"to": format!("telegram:{GROUP}"), "text": "Only once, please."});
    llm.push_when(once, call("send_message", args.clone()));
    llm.push_when(
        once,
        Step::Delay(
            Duration::from_secs(60),
            Box::new(Step::Reply("never".into())),
        ),
    );
    tg.push_private_text(ALICE, ALICE, once);
    wait_sent(&tg, GROUP, "Only once", 1).await;
    app.shutdown().await;
    llm.push_when(once, call("send_message", args));
    llm.push_when(once, Step::Reply("Relayed.".into()));
    let app = App::start(config).await.unwrap();
    wait_sent(&tg, ALICE, "Relayed.", 1).await;
    let told = llm.tool_results_for(once);
    assert_eq!(
        told.last().unwrap(),
        &format!("sent to telegram:{GROUP} (1 message(s))")
    );
    herald_test_support::harness::quiet(&*app.store).await;
    assert_eq!(sent_to(&tg, GROUP, "Only once").len(), 1);
    let mirrored = transcript(&app, &group)
        .await
        .iter()
        .filter(|(_, text)| text.contains("Only once, please."))
        .count();
    assert_eq!(mirrored, 1);
    app.shutdown().await;
    tg.shutdown().await;
}

herald_test_support::on_each_backend!(
    send_message_sqlite,
    send_message_postgres,
    send_message_posts_once_where_routed_and_allowed
);

// ---- switches ----

#[tokio::test]
async fn builtins_switched_off_are_not_offered() {
    init();
    for on in [true, false] {
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().unwrap();
        let mut config = test_config(&llm, &data);
        config.tools.send_message_routes = vec![SendRoute {
            from: "*".into(),
            to: vec!["web:ops".into()],
        }];
        config.tools.cron = on;
        config.tools.send_message = on;
        let app = App::start(config).await.unwrap();
        let (status, _) = Client::new(&app).chat("web:switch", "hello").await;
        assert_eq!(status, 200);
        let names = llm.last_request().tools();
        for tool in ["cron", "send_message"] {
            assert_eq!(names.iter().any(|n| n == tool), on, "{tool}: {names:?}");
        }
        app.shutdown().await;
    }
    // On, but no route: send_message is not offered.
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(test_config(&llm, &data)).await.unwrap();
    Client::new(&app).chat("web:switch", "hello").await;
    let names = llm.last_request().tools();
    assert!(names.iter().any(|n| n == "cron"), "{names:?}");
    assert!(!names.iter().any(|n| n == "send_message"), "{names:?}");
    app.shutdown().await;
}

// ---- the cron tool's rules, against a real store ----

mod cron_rules {
    use std::sync::Arc;

    use herald::agent::tools::{Tool, ToolContext};
    use herald::config::Config;
    use herald::cron::{check_job, CronTool, JobSpec};
    use herald::domain::LaneKey;
    use herald::store::Store;
    use serde_json::json;

    fn ctx(lane: &str, person: &str) -> ToolContext {
        ToolContext {
            lane: LaneKey::new(lane),
            person: person.into(),
            session_id: "s".into(),
            turn_id: None,
            inbox_id: Some(1),
            call_index: 0,
            turn_files: Vec::new(),
            agent: herald::config::DEFAULT_AGENT.to_string(),
        }
    }

    fn spec(name: &str, schedule: &str) -> JobSpec {
        JobSpec {
            name: name.into(),
            schedule: schedule.into(),
            prompt: "p".into(),
            deliver: vec!["web:alice".into()],
            timezone: None,
            catch_up: None,
            enabled: true,
            budget: None,
        }
    }

    async fn run(tool: &CronTool, ctx: &ToolContext, args: serde_json::Value) -> String {
        match tool.call(ctx, &args.to_string()).await {
            Ok(text) => text,
            Err(e) => e.to_string(),
        }
    }

    pub async fn cron_tool_rules(store: Arc<dyn Store>) {
        let tool = CronTool {
            store: store.clone(),
            platforms: Config::default().deliverable(),
            approval: false,
            approval_create: false,
            min_interval: std::time::Duration::from_secs(1),
            poke: Arc::new(tokio::sync::Notify::new()),
            max_budget: herald::domain::Amount::from_units(0.5),
            currency: "USD".into(),
        };
        let alice = ctx("web:alice", "web:local");
        let create = |name: &str, schedule: &str| json!({"action": "create", "name": name, "schedule": schedule, "prompt": "p"});

        // A job's own budget: no more than the operator's `budget.cron_run`, shown in the list.
        let budgeted = |b: f64| json!({"action": "create", "name": "paid", "schedule": "every 1h", "prompt": "p", "budget": b});
        assert_eq!(
            run(&tool, &alice, budgeted(2.0)).await,
            "error: budget 2.00 USD is more than a scheduled run may spend here (0.50 USD, the operator's budget.cron_run)"
        );
        assert!(run(&tool, &alice, budgeted(0.25))
            .await
            .starts_with("added cron job \"paid\""));
        let listed = run(&tool, &alice, json!({"action": "list"})).await;
        assert!(listed.contains(r#""budget":"0.25 USD""#), "{listed}");
        run(&tool, &alice, json!({"action": "remove", "name": "paid"})).await;

        // The operator's words for a bad job, with the model's own name.
        let operator = check_job(&spec("j", "every 1x"), &Config::default().deliverable())
            .unwrap_err()
            .to_string();
        assert_eq!(
            run(&tool, &alice, create("j", "every 1x")).await,
            format!("error: cannot add the job (schedule): {operator}")
        );
        let long = "n".repeat(41);
        assert!(run(&tool, &alice, create(&long, "every 1h"))
            .await
            .starts_with("error: invalid cron job name"));

        // Refused in a scheduled run and without a person; nothing stored.
        for c in [ctx("cron:brief", "cron:cron"), ctx("web:alice", "")] {
            assert!(run(&tool, &c, create("x", "every 1h"))
                .await
                .starts_with("refused: "));
        }
        assert!(store.cron_jobs().await.unwrap().is_empty());

        // A config job and a CLI job named like Alice's scoped names are not hers.
        store
            .cron_sync_config(&[spec("web_alice.conf", "every 1h")], 0)
            .await
            .unwrap();
        assert!(store
            .cron_job_add(&spec("web_alice.cli", "every 1h"), 0)
            .await
            .unwrap());
        for (action, name) in [("pause", "conf"), ("remove", "cli"), ("resume", "cli")] {
            assert_eq!(
                run(&tool, &alice, json!({"action": action, "name": name})).await,
                format!("error: no cron job named {name:?} (see action \"list\")")
            );
        }
        assert_eq!(
            run(&tool, &alice, json!({"action": "list"})).await,
            r#"{"jobs":[]}"#
        );

        // Twenty jobs per conversation; the next is refused, another conversation still may.
        for i in 0..20 {
            let out = run(&tool, &alice, create(&format!("j{i}"), "every 1h")).await;
            assert!(out.starts_with("added cron job"), "{out}");
        }
        assert_eq!(
            run(&tool, &alice, create("j20", "every 1h")).await,
            "error: this conversation already has 20 cron jobs, the most it may have; remove one first"
        );
        assert_eq!(
            run(&tool, &alice, create("j0", "every 1h")).await.as_str(),
            "error: this conversation already has 20 cron jobs, the most it may have; remove one first"
        );
        let bob = ctx("web:bob", "web:local");
        assert!(run(&tool, &bob, create("j0", "every 1h"))
            .await
            .starts_with("added cron job \"j0\""));
        assert_eq!(
            run(&tool, &bob, create("j0", "every 2h")).await,
            "error: a cron job named \"j0\" already exists"
        );
        let row = store.cron_job_get("web_bob.j0").await.unwrap().unwrap();
        assert_eq!(row.owner, Some(LaneKey::new("web:bob")));
        assert_eq!(row.spec.deliver, ["web:bob"]);
        assert_eq!(row.spec.schedule, "every 1h");
    }

    herald_test_support::contract!(
        cron_tool_rules_sqlite,
        cron_tool_rules_postgres,
        cron_tool_rules
    );
}

// ---- a builtin named in tools.require_approval asks first ----

/// The last question with buttons the bot sent: (approve data, deny data, message id).
fn question(tg: &FakeTelegram) -> Option<(String, String, i64)> {
    tg.questions()
        .pop()
        .map(|q| (q.approve, q.deny, q.message_id))
}

#[tokio::test]
async fn send_message_named_for_approval_asks_and_sends_only_when_approved() {
    let (tg, llm, data) = fakes().await;
    let mut config = routed(config(&tg, &llm, &data, &Db::Sqlite));
    config.tools.require_approval = vec!["send_message".into()];
    let app = App::start(config).await.unwrap();
    let group = format!("telegram:{GROUP}");
    for (asked, (press, text)) in [(false, "Denied words."), (true, "Approved words.")]
        .into_iter()
        .enumerate()
    {
        let ask = format!("relay: {text}");
        llm.push_when(
            &ask,
            call("send_message", json!({"to": group, "text": text})),
        );
        llm.push_when(&ask, Step::Reply(format!("after {text}")));
        tg.push_private_text(ALICE, ALICE, &ask);
        wait_until("the question", Duration::from_secs(10), || async {
            tg.sent_messages()
                .iter()
                .filter(|m| m.chat_id == ALICE && m.text.contains("send_message"))
                .count()
                > asked
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            sent_to(&tg, GROUP, text).is_empty(),
            "sent before an answer"
        );
        let (approve, deny, qid) = question(&tg).expect("a question with buttons");
        tg.push_button_press(ALICE, ALICE, qid, if press { &approve } else { &deny });
        wait_sent(&tg, ALICE, &format!("after {text}"), 1).await;
        let told = llm.tool_results_for(&ask);
        if press {
            assert_eq!(told, [format!("sent to {group} (1 message(s))")]);
        } else {
            assert!(told[0].starts_with("denied: "), "{told:?}");
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sent_to(&tg, GROUP, "Approved words.").len(), 1);
    assert!(sent_to(&tg, GROUP, "Denied words.").is_empty());
    app.shutdown().await;
    tg.shutdown().await;
}

// ---- the CLI lists what the daemon offers ----

/// `herald tools list` and the daemon build their built-ins through one function: from one
/// config file, the names the model is offered are exactly the CLI's `builtin` rows, and a
/// built-in named in `tools.require_approval` is listed as asking for that reason.
#[tokio::test]
async fn tools_list_names_exactly_the_builtins_the_daemon_offers() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    // Every switch on: skills need their folder to be offered.
    std::fs::create_dir_all(data.path().join("skills")).unwrap();
    let file = data.path().join("herald.toml");
    std::fs::write(
        &file,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\ndata_dir = {:?}\n\n\
             [llm]\nprovider = \"openai\"\nbase_url = {:?}\nmodel = \"fake-model\"\n\n\
             [tools]\nrequire_approval = [\"send_message\"]\n\
             [[tools.send_message_routes]]\nfrom = \"*\"\nto = [\"web:ops\"]\n",
            data.path().display().to_string(),
            llm.base_url()
        ),
    )
    .unwrap();
    let config = herald::config::load(&herald::config::LoadOptions {
        file: Some(file.clone()),
        ..Default::default()
    })
    .unwrap();

    let app = App::start(config).await.unwrap();
    let (status, _) = Client::new(&app).chat("web:list", "hello").await;
    assert_eq!(status, 200);
    let mut daemon = llm.last_request().tools();
    daemon.sort();
    app.shutdown().await;

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_herald"))
        .args([
            "--config",
            &file.display().to_string(),
            "tools",
            "list",
            "--json",
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("herald tools list runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut listed: Vec<String> = rows
        .iter()
        .filter(|r| r["origin"] == "builtin")
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    listed.sort();
    assert_eq!(listed, daemon);
    for tool in [
        "session_search",
        "memory",
        "skill_view",
        "skill_manage",
        "cron",
        "send_message",
    ] {
        assert!(listed.iter().any(|n| n == tool), "{tool}: {listed:?}");
    }
    let send = rows.iter().find(|r| r["name"] == "send_message").unwrap();
    assert_eq!(send["approval"], "ask", "{send}");
    assert_eq!(send["why"], "tools.require_approval", "{send}");
}
