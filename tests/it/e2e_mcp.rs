//! MCP tools end to end: the real core with a real MCP server (`test-support/mcp/shop_server.py`
//! over stdio, and over streamable HTTP), the fake model asking for its tools, and the person on
//! the real teloxide client against the fake Bot API (or the web chat). Bad servers and
//! `herald tools list` run the real binary and read what an operator would see.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use herald::app::App;
use herald::config::McpServer;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::free_port;
use herald_test_support::harness::{init, test_config, wait_until, Client};
use herald_test_support::herald::{write_config, Herald};
use herald_test_support::mcp::{stdio_server, HttpShop};
use herald_test_support::telegram::{fakes, tg_config, USER};

const WAIT: Duration = Duration::from_secs(30);

/// The tool names a request offered the model, in the order sent.
fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// Waits until the server has answered `tools/list` `n` times, and a moment for the client to
/// take the list in.
async fn listed(starts: &Path, n: usize) {
    wait_until("the MCP server lists its tools", WAIT, || async {
        lines(starts) >= n
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
}

fn path(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).display().to_string()
}

#[tokio::test]
async fn a_shop_lookup_over_telegram_reaches_the_model_and_a_dying_server_is_survived() {
    let (tg, llm, data) = fakes().await;
    let starts = path(&data, "starts");
    let mut c = tg_config(&tg, &llm, &data);
    c.mcp.servers = vec![stdio_server("shop", "normal", &["--starts", &starts])];
    let app = App::start(c).await.expect("app starts");
    listed(Path::new(&starts), 1).await;

    llm.push(Step::ToolCall(
        "shop__lookup_order".into(),
        r#"{"id":"A-1001"}"#.into(),
    ));
    llm.push(Step::Reply("Your blue kettle has shipped.".into()));
    tg.push_private_text(USER, USER, "where is my order A-1001?");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0].text, "Your blue kettle has shipped.");
    let reqs = llm.requests();
    assert_eq!(
        reqs[1].last_tool_result(),
        "order A-1001: shipped, blue kettle, arriving 2026-12-03",
        "the server's own answer reaches the model"
    );
    // Sorted, stable names; the tool whose description is an injection is withheld.
    let names = reqs[0].server_tools("shop");
    assert_eq!(
        names,
        [
            "shop__chart",
            "shop__delete_order",
            "shop__die",
            "shop__fail",
            "shop__huge",
            "shop__lookup_order",
            "shop__shout",
            "shop__slow"
        ]
    );
    let all = reqs[0].tools();
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted, "the whole tool list is in name order");

    // The server dies in the middle of a call: the model is told, the person still gets an
    // answer, and the server's tools come back once it is restarted.
    llm.push(Step::ToolCall("shop__die".into(), "{}".into()));
    llm.push(Step::Reply("The shop is not answering right now.".into()));
    tg.push_private_text(USER, USER, "cancel everything");
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1].text, "The shop is not answering right now.");
    let told = llm.requests()[3].last_tool_result();
    assert!(
        told.contains("unavailable") && told.contains("shop"),
        "{told}"
    );
    listed(Path::new(&starts), 2).await;
    llm.push(Step::ToolCall(
        "shop__lookup_order".into(),
        r#"{"id":"A-1002"}"#.into(),
    ));
    llm.push(Step::Reply("Socks are being packed.".into()));
    tg.push_private_text(USER, USER, "and A-1002?");
    let sent = tg.wait_for_sent(3, WAIT).await;
    assert_eq!(sent[2].text, "Socks are being packed.");
    let reqs = llm.requests();
    assert_eq!(
        reqs[5].last_tool_result(),
        "order A-1002: packing, wool socks, arriving 2026-12-05"
    );
    assert_eq!(
        reqs[4].server_tools("shop"),
        names,
        "the same names after a restart"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn a_down_server_s_tools_leave_the_next_request_and_return_after_reconnect() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let starts = path(&data, "starts");
    let gate = path(&data, "gate");
    let mut c = test_config(&llm, &data);
    c.mcp.servers = vec![stdio_server(
        "shop",
        "normal",
        &["--starts", &starts, "--gate", &gate],
    )];
    let app = App::start(c).await.expect("app starts");
    let client = Client::new(&app);
    listed(Path::new(&starts), 1).await;

    // Keep it from starting again, then make it exit.
    std::fs::write(&gate, "closed").unwrap();
    llm.push(Step::ToolCall("shop__die".into(), "{}".into()));
    llm.push(Step::Reply("noted".into()));
    let (status, body) = client.chat("web:mcp", "stop the shop").await;
    assert_eq!((status, body["reply"].as_str()), (200, Some("noted")));
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (_, body) = client.chat("web:mcp", "anything from the shop?").await;
    assert_eq!(body["reply"], "reply to: anything from the shop?");
    let down = llm.requests().last().unwrap().clone();
    assert!(down.server_tools("shop").is_empty(), "{:?}", down.tools());
    assert!(
        down.tools().contains(&"session_search".to_string()),
        "builtins stay"
    );

    std::fs::remove_file(&gate).unwrap();
    listed(Path::new(&starts), 2).await;
    let (_, body) = client.chat("web:mcp", "and now?").await;
    assert_eq!(body["reply"], "reply to: and now?");
    let up = llm.requests().last().unwrap().clone();
    assert_eq!(up.server_tools("shop").len(), 8, "{:?}", up.tools());
    app.shutdown().await;
}

#[tokio::test]
async fn slow_failing_and_huge_results_come_back_as_text_the_model_can_use() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let starts = path(&data, "starts");
    let mut c = test_config(&llm, &data);
    let mut shop = stdio_server("shop", "normal", &["--starts", &starts]);
    shop.timeout_secs = 1;
    c.mcp.servers = vec![shop];
    let app = App::start(c).await.expect("app starts");
    let client = Client::new(&app);
    listed(Path::new(&starts), 1).await;

    llm.push(Step::ToolCall("shop__fail".into(), "{}".into()));
    llm.push(Step::Reply("it failed".into()));
    let (_, body) = client.chat("web:mcp", "fail").await;
    assert_eq!(body["reply"], "it failed");
    assert_eq!(
        llm.requests()[1].last_tool_result(),
        "error: the order service is down"
    );

    let started = Instant::now();
    llm.push(Step::ToolCall("shop__huge".into(), "{}".into()));
    llm.push(Step::Reply("that was a lot".into()));
    let (_, body) = client.chat("web:mcp", "everything please").await;
    assert_eq!(body["reply"], "that was a lot");
    let seen = llm.requests()[3].last_tool_result();
    // Capped to 100 000 characters (head and tail) by the MCP layer, then previewed by the
    // turn loop; the image is a named file, never pasted.
    assert!(seen.contains("HEAD x"), "{}", &seen[..200.min(seen.len())]);
    assert!(seen.contains("90214 characters"), "{}", &seen[..300]);
    assert!(
        seen.contains("x TAIL\n[file "),
        "{}",
        &seen[seen.len().saturating_sub(300)..]
    );
    assert!(
        seen.len() < 20_000,
        "a 10 MB result reaches the model as a preview ({} chars)",
        seen.len()
    );
    eprintln!(
        "10 MB MCP result: turn took {:?}, model saw {} chars",
        started.elapsed(),
        seen.len()
    );

    // A slow call ends at the server's timeout (the server is still busy with it).
    llm.push(Step::ToolCall(
        "shop__slow".into(),
        r#"{"seconds":3}"#.into(),
    ));
    llm.push(Step::Reply("too slow".into()));
    let (_, body) = client.chat("web:mcp", "be slow").await;
    assert_eq!(body["reply"], "too slow");
    assert_eq!(
        llm.requests()[5].last_tool_result(),
        "error: the tool did not answer within 1 seconds"
    );

    // The lane is not stuck: an ordinary message still gets its answer.
    let (_, body) = client.chat("web:mcp", "still there?").await;
    assert_eq!(body["reply"], "reply to: still there?");
    app.shutdown().await;
}

#[tokio::test]
async fn a_streamable_http_server_answers_with_its_bearer_token_and_its_tools_leave_when_it_dies() {
    init();
    let shop = HttpShop::start(Some("t0ken-for-the-shop")).await;
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.mcp.servers = vec![McpServer {
        name: "shop".into(),
        url: Some(shop.url.parse().unwrap()),
        bearer_token: Some(herald::config::Secret::new("t0ken-for-the-shop")),
        ..McpServer::default()
    }];
    let app = App::start(c).await.expect("app starts");
    let client = Client::new(&app);
    // No start signal over HTTP: ask until the tool is offered.
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, _) = client.chat("web:http", "ping").await;
        if llm
            .last_request()
            .server_tools("shop")
            .contains(&"shop__shout".to_string())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the HTTP server's tools never came"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    llm.push(Step::ToolCall(
        "shop__shout".into(),
        r#"{"text":"hello"}"#.into(),
    ));
    llm.push(Step::Reply("it shouted".into()));
    let (_, body) = client.chat("web:http", "shout hello").await;
    assert_eq!(body["reply"], "it shouted");
    assert_eq!(llm.requests().last().unwrap().last_tool_result(), "HELLO");

    // The server goes away: the next call says so, and the turn after it is offered no shop tools.
    drop(shop);
    tokio::time::sleep(Duration::from_millis(300)).await;
    llm.push(Step::ToolCall(
        "shop__shout".into(),
        r#"{"text":"anyone?"}"#.into(),
    ));
    llm.push(Step::Reply("the shop is gone".into()));
    let (_, body) = client.chat("web:http", "shout again").await;
    assert_eq!(body["reply"], "the shop is gone");
    let told = llm.requests().last().unwrap().last_tool_result();
    assert!(told.contains("unavailable"), "{told}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, _) = client.chat("web:http", "tools now?").await;
    let last = llm.requests().last().unwrap().clone();
    assert!(last.server_tools("shop").is_empty(), "{:?}", last.tools());
    app.shutdown().await;
}

/// A config file for the real binary: the fake model, the given `[[mcp.servers]]` tables.
fn config_file(dir: &tempfile::TempDir, llm: &FakeLlm, port: u16, extra: &str) -> PathBuf {
    write_config(
        dir.path(),
        &format!("127.0.0.1:{port}"),
        &llm.base_url(),
        extra,
    )
}

fn server_toml(name: &str, mode: &str, extra: &str) -> String {
    format!(
        "[[mcp.servers]]\nname = {name:?}\ncommand = \"python3\"\nargs = [{:?}, \"--mode\", {mode:?}]\n{extra}\n",
        herald_test_support::mcp::script().display().to_string()
    )
}

#[tokio::test]
async fn bad_servers_each_log_one_clear_line_per_attempt_and_the_lane_answers() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let servers = [
        server_toml("junk", "garbage", "init_timeout_secs = 2"),
        server_toml("mute", "mute", "init_timeout_secs = 2"),
        server_toml("crash", "exit", ""),
        server_toml("shop", "normal", ""),
    ]
    .concat();
    let file = config_file(&data, &llm, port, &servers);
    let log_path = data.path().join("herald.log");
    let mut child = Herald::serve_config(&file, port)
        .env("HERALD_LOG__LEVEL", "info")
        .log_to(&log_path)
        .spawn();
    let started = Instant::now();
    let client = Client::for_addr(&child.addr());
    child.wait_ready(WAIT).await;
    let ready = started.elapsed();
    assert!(
        ready < Duration::from_secs(5),
        "readiness does not wait for MCP servers ({ready:?})"
    );
    let (status, body) = client.chat("web:bad", "hello").await;
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("reply to: hello"))
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (_, body) = client.chat("web:bad", "still fine?").await;
    assert_eq!(body["reply"], "reply to: still fine?");
    let offered_now = llm.last_request().tools();
    assert!(offered_now.contains(&"shop__lookup_order".to_string()));
    assert!(!offered_now
        .iter()
        .any(|n| n.starts_with("junk__") || n.starts_with("mute__") || n.starts_with("crash__")));
    child.kill();

    let out = std::fs::read_to_string(&log_path).unwrap();
    let attempts = |server: &str| -> Vec<&str> {
        out.lines()
            .filter(|l| {
                l.contains("mcp server unavailable") && l.contains(&format!("server={server}"))
            })
            .collect()
    };
    let (junk, mute, crash) = (attempts("junk"), attempts("mute"), attempts("crash"));
    for (name, lines, reason) in [
        ("junk", &junk, "line(s) on stdout were not JSON-RPC"),
        (
            "mute",
            &mute,
            "no answer to initialize and tools/list within 2 s",
        ),
        (
            "crash",
            &crash,
            "stderr: boom: cannot open the order database",
        ),
    ] {
        assert!(!lines.is_empty(), "no line for {name}:\n{out}");
        assert!(lines[0].contains(reason), "{name}: {}", lines[0]);
        assert!(lines[0].contains("WARN"), "{}", lines[0]);
        // About 6 s of backoff from 0.5 s: a handful of attempts, not a flood.
        assert!(
            lines.len() <= 6,
            "{name} logged {} lines:\n{}",
            lines.len(),
            lines.join("\n")
        );
    }
    assert!(crash[0].contains("the process exited"), "{}", crash[0]);
    eprintln!("{}\n{}\n{}", junk[0], mute[0], crash[0]);
    assert!(attempts("shop").is_empty(), "{out}");
}

#[tokio::test]
async fn tools_list_shows_builtins_and_mcp_tools_with_origin_and_approval() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let servers = [
        server_toml("shop", "normal", "require_approval = [\"shout\"]"),
        server_toml("crash", "exit", ""),
        "[approvals]\ndeny = [\"shop__fail\"]\n".to_string(),
    ]
    .concat();
    let file = config_file(&data, &llm, free_port(), &servers);
    let run = |json: bool| {
        let mut cmd = Herald::new()
            .arg("--config")
            .arg(&file)
            .args(["tools", "list"]);
        if json {
            cmd = cmd.arg("--json");
        }
        let out = cmd.output();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run(false);
    let row = |name: &str| -> Vec<String> {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row {name}:\n{table}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(row("session_search")[1..], ["builtin", "no"]);
    assert_eq!(row("shop__lookup_order")[1..], ["mcp:shop", "no"]);
    assert_eq!(row("shop__shout")[1..], ["mcp:shop", "ask", "config"]);
    assert_eq!(
        row("shop__delete_order")[1..],
        ["mcp:shop", "hardline", "approvals.hardline"]
    );
    assert_eq!(
        row("shop__fail")[1..],
        ["mcp:shop", "denied", "approvals.deny"]
    );
    let crash = table
        .lines()
        .find(|l| l.contains("mcp:crash"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        crash.contains("unreachable: the process exited (exit status: 2) before it was ready")
            && crash.contains("boom"),
        "{crash}"
    );
    let sneaky = row("shop__sneaky");
    assert_eq!(sneaky[1..3], ["mcp:shop", "withheld:"], "{table}");

    let json = run(true);
    let rows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(rows.iter().any(|r| r["name"] == "shop__shout"
        && r["origin"] == "mcp:shop"
        && r["approval"] == "ask"));
}
