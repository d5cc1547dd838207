//! Live reload of the parts that hold connections, through the real core: a changed Telegram
//! token reconnects Telegram alone (its requests move to the new `/bot<token>/` path, none on
//! the old one after the switch) while Discord keeps its one gateway session, and an
//! allowlist-only change reconnects nothing; MCP servers restart only when their table changed
//! (an unchanged server's process and a call in flight on it live through the reload), added
//! ones start, removed ones leave the next turn's tool list while a turn in flight keeps its
//! own; the first `[[hooks]]` can come by reload; `[[people]]` reach the budget approvers'
//! questions without a restart.

use std::path::Path;
use std::time::Duration;

use herald::app::App;
use herald::config::{HookMode, HookSpec, Secret, SignatureKind};
use herald_test_support::fake_discord::FakeDiscord;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::fake_telegram::message_json;
use herald_test_support::harness::{init, quiet, test_config, wait_until, Client};
use herald_test_support::mcp::{sdk_stdio, stdio_server};
use herald_test_support::telegram::{fakes, tg_config, TOKEN, USER};

const WAIT: Duration = Duration::from_secs(40);
/// The rotated token: same bot (the numeric prefix), new secret.
const NEW_TOKEN: &str = "123456:ROTATED-token";
const DISCORD_TOKEN: &str = "fake-token";
const DISCORD_USER: u64 = 42;
const DM: u64 = 900;
const BOB: i64 = 2002;

fn texts(tg: &herald_test_support::fake_telegram::FakeTelegram, chat: i64) -> Vec<String> {
    tg.chat_view(chat).into_iter().map(|m| m.text).collect()
}

/// `c` with the Discord adapter on `discord`, `DISCORD_USER` allowed.
fn with_discord(c: &mut herald::config::Config, discord: &FakeDiscord) {
    c.discord.token = Some(Secret::new(DISCORD_TOKEN));
    c.discord.api_url = discord.api_url().parse().unwrap();
    c.discord.ratelimiter = false;
    c.discord.allowed_users = vec![DISCORD_USER.to_string()];
}

#[tokio::test]
async fn a_changed_telegram_token_reconnects_telegram_alone() {
    let (tg, llm, data) = fakes().await;
    let discord = FakeDiscord::start(DISCORD_TOKEN).await;
    let mut c = tg_config(&tg, &llm, &data);
    c.pairing.enabled = false;
    with_discord(&mut c, &discord);
    let app = App::start(c.clone()).await.unwrap();
    discord.wait_ready(WAIT).await;

    tg.push_message(|id| message_json(id, USER, USER, "one"));
    wait_until("Telegram answers", WAIT, || async {
        texts(&tg, USER) == ["reply to: one"]
    })
    .await;
    let get_me = tg.calls("getMe").len();

    // An allowlist-only change: Bob is let in, nothing reconnects.
    let mut allow = c.clone();
    allow.telegram.allowed_users.push(BOB.to_string());
    let report = app.reload.apply(allow.clone()).await.unwrap();
    assert_eq!(report.applied, ["telegram.allowed_users"]);
    tg.push_message(|id| message_json(id, BOB, BOB, "bob here"));
    wait_until("Bob is answered", WAIT, || async {
        texts(&tg, BOB) == ["reply to: bob here"]
    })
    .await;
    assert_eq!(
        tg.calls("getMe").len(),
        get_me,
        "the adapter did not restart"
    );

    // The token changes: Telegram reconnects with it; Discord is untouched.
    tg.accept_token(NEW_TOKEN);
    let mut rotated = allow.clone();
    rotated.telegram.token = Some(Secret::new(NEW_TOKEN));
    let report = app.reload.apply(rotated).await.unwrap();
    assert_eq!(report.applied, ["telegram.token"]);
    assert!(report.restart_needed.is_empty(), "{report:?}");
    // `apply` returns once the old adapter's tasks ended: nothing presents the old token now.
    let old_after_switch = tg.requests_with_token(TOKEN);
    tg.push_message(|id| message_json(id, USER, USER, "two"));
    wait_until("Telegram answers on the new token", WAIT, || async {
        texts(&tg, USER) == ["reply to: one", "reply to: two"]
    })
    .await;
    quiet(app.store.as_ref()).await;
    assert!(tg.requests_with_token(NEW_TOKEN) > 0);
    assert_eq!(
        tg.requests_with_token(TOKEN),
        old_after_switch,
        "no request on the old token's path after the switch"
    );

    discord.dispatch_message_create(DM, None, DISCORD_USER, "still there?", false, None);
    let sent = discord.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].content, "reply to: still there?");
    assert_eq!(
        discord.identify_count(),
        1,
        "one gateway session throughout"
    );
    assert_eq!(discord.resume_count(), 0);
    app.shutdown().await;
}

fn pid_in(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit(')').next().unwrap_or("").trim_start();
        !state.starts_with('Z') && !state.starts_with('X')
    })
}

/// Chats on a lane of its own until every one of `tools` is offered.
async fn offered(client: &Client, llm: &FakeLlm, tools: &[&str]) {
    wait_until("the servers' tools are offered", WAIT, || async {
        let _ = client.chat("web:probe", "ping").await;
        let listed = llm.last_request().tools();
        tools.iter().all(|t| listed.iter().any(|n| n == t))
    })
    .await;
}

#[tokio::test]
async fn a_reload_restarts_only_the_mcp_servers_whose_table_changed() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let pid = |name: &str| {
        data.path()
            .join(format!("{name}.pid"))
            .display()
            .to_string()
    };
    let mut c = test_config(&llm, &data);
    c.mcp.servers = vec![
        sdk_stdio("keep", &["--pidfile", &pid("keep")]),
        sdk_stdio("memo", &["--pidfile", &pid("memo")]),
        stdio_server("gone", "normal", &[]),
    ];
    let app = App::start(c.clone()).await.unwrap();
    let client = Client::new(&app);
    offered(
        &client,
        &llm,
        &["keep__long", "memo__echo", "gone__lookup_order"],
    )
    .await;
    let keep = pid_in(&data.path().join("keep.pid")).unwrap();
    let memo = pid_in(&data.path().join("memo.pid")).unwrap();

    // A turn calls a 3-second tool on `keep`; the reload lands while it runs.
    llm.push(Step::ToolCall(
        "keep__long".into(),
        r#"{"seconds":3}"#.into(),
    ));
    llm.push(Step::Reply("long done".into()));
    let before = llm.request_count();
    let in_flight = Client::new(&app);
    let turn = tokio::spawn(async move { in_flight.chat("web:flight", "run long").await });
    wait_until("the turn calls the tool", WAIT, || async {
        llm.request_count() > before
    })
    .await;
    let mut next = c.clone();
    next.mcp.servers = vec![
        sdk_stdio("keep", &["--pidfile", &pid("keep")]),
        sdk_stdio(
            "memo",
            &["--pidfile", &pid("memo"), "--instructions", "Changed memo."],
        ),
        stdio_server("fresh", "normal", &[]),
    ];
    let report = app.reload.apply(next).await.unwrap();
    assert_eq!(report.applied, ["mcp.servers"]);

    let (status, body) = turn.await.unwrap();
    assert_eq!((status, body["reply"].as_str()), (200, Some("long done")));
    let second = llm.last_request();
    assert_eq!(
        second.last_tool_result(),
        "done after 10 steps",
        "the unchanged server's call went on through the reload"
    );
    let requests = llm.requests();
    let first = &requests[requests.len() - 2];
    assert!(first
        .server_tools("gone")
        .contains(&"gone__lookup_order".to_string()));
    assert_eq!(
        second.server_tools("gone"),
        first.server_tools("gone"),
        "the turn in flight keeps the tool list it started with"
    );

    // The next turn: the removed server's tools are gone at once.
    let _ = client.chat("web:after", "hello").await;
    assert!(llm.last_request().server_tools("gone").is_empty());
    offered(&client, &llm, &["fresh__lookup_order", "memo__echo"]).await;
    wait_until("memo runs as a new process", WAIT, || async {
        pid_in(&data.path().join("memo.pid")).is_some_and(|p| p != memo && alive(p))
    })
    .await;
    wait_until("memo's old process ends", WAIT, || async { !alive(memo) }).await;
    assert_eq!(pid_in(&data.path().join("keep.pid")), Some(keep));
    assert!(alive(keep), "the unchanged server kept its process");
    app.shutdown().await;
}

#[tokio::test]
async fn the_first_hook_can_come_by_reload() {
    let (tg, llm, data) = fakes().await;
    let c = tg_config(&tg, &llm, &data);
    let app = App::start(c.clone()).await.unwrap();
    let secret = "a-webhook-secret-of-some-length";
    let post = || {
        reqwest::Client::new()
            .post(format!("http://{}/hooks/alerts", app.addr))
            .bearer_auth(secret)
            .body(r#"{"msg":"disk full"}"#)
            .send()
    };
    assert_eq!(
        post().await.unwrap().status().as_u16(),
        404,
        "no such hook yet"
    );

    let mut next = c.clone();
    next.hooks = vec![HookSpec {
        name: "alerts".into(),
        secret: Some(Secret::new(secret)),
        secret_env: None,
        signature: SignatureKind::Bearer,
        mode: HookMode::Notify,
        prompt: "alert: {{payload.msg}}".into(),
        deliver: vec![format!("telegram:{USER}")],
        budget: None,
        filter: Vec::new(),
        max_body_bytes: 4096,
        rate_per_min: 60,
    }];
    let report = app.reload.apply(next).await.unwrap();
    assert_eq!(report.applied, ["hooks"]);
    assert_eq!(post().await.unwrap().status().as_u16(), 202);
    wait_until("the alert arrives", WAIT, || async {
        texts(&tg, USER) == ["alert: disk full"]
    })
    .await;
    assert_eq!(llm.request_count(), 0, "notify runs no model");
    app.shutdown().await;
}

async fn say(client: &Client, who: &str, text: &str) -> String {
    let (status, body) = client
        .chat_body(serde_json::json!({"lane": format!("web:{who}"), "text": text, "sender": who}))
        .await;
    assert_eq!(status, 200, "{body}");
    body["reply"].as_str().unwrap_or_default().to_string()
}

/// The open approval rows of `lane`.
async fn approvals(client: &Client, lane: &str) -> Vec<serde_json::Value> {
    let (_, body) = client.get(&format!("/api/v1/lanes/{lane}/approvals")).await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["approvals"].as_array().cloned().unwrap_or_default()
}

/// `budget.approvers = ["ops"]`: who `ops` is comes from `[[people]]`, and a reload that moves
/// the name to another identity sends the next budget question there, where a press counts.
#[tokio::test]
async fn a_reloaded_person_is_the_budget_approver_from_then_on() {
    init();
    let llm = FakeLlm::start().await;
    // At 0.10 per million prompt tokens, each call costs about 0.10: one call spends the cap.
    llm.set_billing(herald_test_support::fake_llm::Billing::Fixed(1_000_000));
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.budget.prices = vec![herald::config::PriceConfig {
        model: "fake-*".into(),
        input: Some(0.1),
        output: Some(1.0),
        cache_read: Some(0.05),
        cache_write: Some(0.1),
    }];
    c.budget.person_daily = Some(0.1);
    c.budget.approvers = vec!["ops".into()];
    let person = |id: &str| herald::config::Person {
        name: "ops".into(),
        ids: vec![id.into()],
    };
    c.people = vec![person("web:boss")];
    let app = App::start(c.clone()).await.unwrap();
    let client = Client::new(&app);

    let mut next = c.clone();
    next.people = vec![person("web:chief")];
    let report = app.reload.apply(next).await.unwrap();
    assert_eq!(report.applied, ["people"]);

    assert_eq!(say(&client, "ann", "hello").await, "reply to: hello");
    let refused = say(&client, "ann", "again").await;
    assert!(refused.contains("daily budget"), "{refused}");
    wait_until("the chief is asked", WAIT, || async {
        approvals(&client, "web:chief").await.len() == 1
    })
    .await;
    assert!(
        approvals(&client, "web:boss").await.is_empty(),
        "not the old identity"
    );
    let question = approvals(&client, "web:chief").await.remove(0);
    let resp = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/approvals/{}",
            client.base,
            question["id"].as_str().unwrap()
        ))
        .json(&serde_json::json!({"lane": "web:chief", "approve": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        200,
        "the reloaded approver's press counts"
    );
    assert_eq!(say(&client, "ann", "third").await, "reply to: third");
    app.shutdown().await;
}

/// Discord's slash commands check the sender before their inbox write: that check reads the
/// reloaded allowlist too, and the allowlist change reconnects nothing.
#[tokio::test]
async fn a_slash_command_from_a_person_allowed_by_reload_runs() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let discord = FakeDiscord::start(DISCORD_TOKEN).await;
    let mut c = test_config(&llm, &data);
    c.pairing.enabled = false;
    with_discord(&mut c, &discord);
    let app = App::start(c.clone()).await.unwrap();
    discord.wait_ready(WAIT).await;
    discord
        .wait_for("slash commands registered", WAIT, |f| {
            (f.registered_commands().len() >= 4).then_some(())
        })
        .await;
    const NEWCOMER: u64 = 77;
    let status = |discord: &FakeDiscord| {
        let (_, token) = discord.dispatch_interaction_create(DM + 1, None, NEWCOMER, "status", &[]);
        token
    };
    let answer = |token: String| {
        discord.wait_for("the command's answer", WAIT, move |f| {
            let x = f.followups().into_iter().find(|x| x.token == token)?;
            x.body["content"].as_str().map(String::from)
        })
    };
    let refused = answer(status(&discord)).await;
    assert_eq!(refused, "You are not allowed to use this bot.");
    // The refused command is still recorded (and dropped by the worker): let it finish, so the
    // next `/status` meets an idle lane.
    quiet(app.store.as_ref()).await;

    let mut next = c.clone();
    next.discord.allowed_users.push(NEWCOMER.to_string());
    let report = app.reload.apply(next).await.unwrap();
    assert_eq!(report.applied, ["discord.allowed_users"]);
    let text = answer(status(&discord)).await;
    assert!(
        text.contains("Nothing is running right now."),
        "the command ran for the newcomer: {text}"
    );
    assert_eq!(discord.identify_count(), 1, "nothing reconnected");
    app.shutdown().await;
}
