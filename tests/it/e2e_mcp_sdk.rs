//! MCP against a server built on the official Python SDK (`test-support/mcp/sdk_server.py`,
//! `mcp` 1.x from PyPI, installed by `.ci/run`): the real core and the fake model, the person on
//! the web chat or the real teloxide client. Covers what real servers do that the hand-written
//! test server did not: instructions, task-only tools, annotations, images, resource links,
//! progress, list changes mid-conversation, a restarted HTTP server answering a stale session
//! with an id-less 400, a wrapper's grandchild outliving its parent, a task-only tool over
//! streamable HTTP (JSON and SSE answers), and elicitation declined.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use herald::app::App;
use herald::config::McpServer;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, wait_until, Client};
use herald_test_support::herald::{write_config, Herald};
use herald_test_support::mcp::{sdk_stdio, HttpSdk};

const WAIT: Duration = Duration::from_secs(40);

/// Chats on a lane of its own until `tool` is offered (a server connects in the background).
async fn offered_soon(client: &Client, llm: &FakeLlm, tool: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let _ = client.chat("web:probe", "ping").await;
        if llm.last_request().tools().iter().any(|n| n == tool) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{tool} never came");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One turn on `lane` in which the model calls `tool`; returns what the model was told.
async fn call(client: &Client, llm: &FakeLlm, lane: &str, tool: &str, args: &str) -> String {
    llm.push(Step::ToolCall(tool.into(), args.into()));
    llm.push(Step::Reply("ok".into()));
    let (status, body) = client.chat(lane, &format!("use {tool}")).await;
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("ok")),
        "{body}"
    );
    llm.requests().last().unwrap().last_tool_result()
}

#[tokio::test]
async fn an_sdk_server_s_instructions_tools_images_links_and_progress_reach_the_model() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    let mut memo = sdk_stdio("memo", &[]);
    memo.timeout_secs = 1;
    memo.max_call_secs = 20;
    c.mcp.servers = vec![memo];
    let app = App::start(c).await.expect("app starts");
    let client = Client::new(&app);
    offered_soon(&client, &llm, "memo__echo").await;
    let probe_system = llm.requests().last().unwrap().system();

    // A session opened now carries the server's instructions, labelled; the task-only tool is
    // left out and the resource reader is offered.
    assert_eq!(
        call(&client, &llm, "web:memo", "memo__echo", r#"{"text":"hi"}"#).await,
        "hi"
    );
    let first = &llm.requests()[llm.requests().len() - 2];
    let system = first.system();
    assert!(
        system.contains("Instructions from the MCP server \"memo\"")
            && system.contains("Memo board: read notes with note_read before writing")
            && system.contains("<reference-data source=\"tool guidance (mcp:memo)\">"),
        "{system}"
    );
    assert_eq!(
        first.server_tools("memo"),
        [
            "memo__confirm",
            "memo__echo",
            "memo__grow",
            "memo__link",
            "memo__long",
            "memo__note_read",
            "memo__note_write",
            "memo__picture",
            "memo__read_resource"
        ]
    );
    // The session opened before the server connected keeps its prompt byte for byte.
    let _ = client.chat("web:probe", "again").await;
    assert_eq!(llm.requests().last().unwrap().system(), probe_system);

    // An image result: a file the turn names (this model does not see images), no base64.
    let told = call(&client, &llm, "web:memo", "memo__picture", "{}").await;
    assert!(told.starts_with("a red dot\n[file "), "{told}");
    assert!(
        told.ends_with(
            ": image from memo__picture (image/png, 70 bytes); this model cannot see it; \
             attach_file can send it to the person]"
        ),
        "{told}"
    );
    // A resource link, then reading it through the same server.
    let link = call(&client, &llm, "web:memo", "memo__link", "{}").await;
    assert!(link.contains("[resource link: memo://welcome"), "{link}");
    assert_eq!(
        call(
            &client,
            &llm,
            "web:memo",
            "memo__read_resource",
            r#"{"uri":"memo://welcome"}"#
        )
        .await,
        "[resource memo://welcome]\nWelcome to the memo board: A-1001 ships Friday."
    );
    // Progress every 0.3 s keeps a 2.4 s call alive under a 1 s time-out.
    assert_eq!(
        call(
            &client,
            &llm,
            "web:memo",
            "memo__long",
            r#"{"seconds":2.4}"#
        )
        .await,
        "done after 8 steps"
    );

    // A tool added mid-conversation: not offered in the turn that added it, offered next turn.
    let before = llm.request_count();
    assert_eq!(
        call(&client, &llm, "web:memo", "memo__grow", "{}").await,
        "grown"
    );
    let reqs = llm.requests();
    assert!(!reqs[before + 1]
        .server_tools("memo")
        .contains(&"memo__fresh".to_string()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        call(&client, &llm, "web:memo", "memo__fresh", "{}").await,
        "fresh from the server"
    );
    assert!(llm.requests()[before + 2]
        .server_tools("memo")
        .contains(&"memo__fresh".to_string()));
    app.shutdown().await;
}

#[tokio::test]
async fn an_image_result_is_handed_over_as_bytes_with_its_mime_type() {
    init();
    let server = sdk_stdio("memo", &[]);
    let tracker = tokio_util::task::TaskTracker::new();
    let conn = herald::agent::mcp::connect::connect(&server, &tracker)
        .await
        .expect("connects");
    let tool = herald::agent::mcp::mcp_tool(&server, &conn, "picture").expect("picture");
    let result = tool.call_full("{}").await.expect("a result");
    assert_eq!(result.images.len(), 1);
    assert_eq!(result.images[0].mime_type, "image/png");
    assert_eq!(&result.images[0].data[..8], b"\x89PNG\r\n\x1a\n");
    assert!(!tool.read_only);
    let note_read = herald::agent::mcp::mcp_tool(&server, &conn, "note_read").unwrap();
    assert!(note_read.read_only);
    assert_eq!(note_read.asks, None);
    let note_write = herald::agent::mcp::mcp_tool(&server, &conn, "note_write").unwrap();
    assert_eq!(note_write.asks, Some("destructive hint"));
    assert!(herald::agent::mcp::mcp_tool(&server, &conn, "research").is_none());
    conn.close().await;
}

#[tokio::test]
async fn a_restarted_http_server_that_answers_a_stale_session_with_400_is_reached_again() {
    init();
    let mut sdk = HttpSdk::start(0).await;
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.mcp.servers = vec![McpServer {
        name: "memo".into(),
        url: Some(sdk.url.parse().unwrap()),
        timeout_secs: 30,
        ..McpServer::default()
    }];
    let app = App::start(c).await.expect("app starts");
    let client = Client::new(&app);
    offered_soon(&client, &llm, "memo__echo").await;
    assert_eq!(
        call(&client, &llm, "web:memo", "memo__echo", r#"{"text":"one"}"#).await,
        "one"
    );

    // The server restarts on the same port; the session Herald holds is unknown to it.
    sdk.kill().await;
    let _sdk = HttpSdk::start(sdk.port).await;
    let told = call(&client, &llm, "web:memo", "memo__echo", r#"{"text":"two"}"#).await;
    assert!(
        told == "two" || told.contains("unavailable"),
        "the call ends at once, not after its 30 s time-out: {told}"
    );
    wait_until("a new session", WAIT, || async {
        call(
            &client,
            &llm,
            "web:memo",
            "memo__echo",
            r#"{"text":"three"}"#,
        )
        .await
            == "three"
    })
    .await;
    app.shutdown().await;
}

/// Whether `pid` is a live process (a zombie waiting to be reaped counts as gone).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            !state.starts_with('Z') && !state.starts_with('X')
        }
        Err(_) => false,
    }
}

fn pid_in(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[tokio::test]
async fn killing_a_wrapper_ends_its_server_and_stopping_herald_ends_the_group() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let pidfile = data.path().join("server.pid");
    let wrapper = data.path().join("server.pid.wrapper");
    let mut c = test_config(&llm, &data);
    c.mcp.servers = vec![sdk_stdio(
        "memo",
        &["--wrap", "--pidfile", &pidfile.display().to_string()],
    )];
    let app = App::start(c).await.expect("app starts");
    let client = Client::new(&app);
    offered_soon(&client, &llm, "memo__echo").await;
    let (server, wrap) = (pid_in(&pidfile).unwrap(), pid_in(&wrapper).unwrap());
    assert!(alive(server) && alive(wrap));

    // SIGKILL to the wrapper alone: the server it started still holds Herald's pipes.
    unsafe {
        libc::kill(wrap, libc::SIGKILL);
    }
    wait_until("the orphaned server ends", WAIT, || async {
        !alive(server)
    })
    .await;

    // It comes back (a new group), and stopping Herald ends that one too.
    wait_until("a new server", WAIT, || async {
        pid_in(&pidfile).is_some_and(|p| p != server && alive(p))
    })
    .await;
    offered_soon(&client, &llm, "memo__echo").await;
    let (server, wrap) = (pid_in(&pidfile).unwrap(), pid_in(&wrapper).unwrap());
    app.shutdown().await;
    wait_until("the group ends with Herald", WAIT, || async {
        !alive(server) && !alive(wrap)
    })
    .await;
}

#[tokio::test]
async fn tools_list_says_why_each_tool_asks_and_a_destructive_hint_asks_in_the_chat() {
    use herald_test_support::telegram::{fakes, tg_config, USER};
    init();
    let (tg, llm, data) = fakes().await;
    let state = data.path().join("notes");
    let python = herald_test_support::mcp::sdk_python();
    let script = herald_test_support::mcp::sdk_script().display().to_string();
    let servers = format!(
        "[[mcp.servers]]\nname = \"memo\"\ncommand = {python:?}\nargs = [{script:?}, \"--state\", {:?}]\nrequire_approval = [\"echo\"]\ninit_timeout_secs = 60\n\n[[mcp.servers]]\nname = \"trusted\"\ncommand = {python:?}\nargs = [{script:?}]\nallow = [\"note_write\"]\ninit_timeout_secs = 60\n",
        state.display().to_string()
    );
    let file = write_config(data.path(), "127.0.0.1:0", &llm.base_url(), &servers);
    let out = Herald::new()
        .arg("--config")
        .arg(&file)
        .args(["tools", "list"])
        .output();
    let table = String::from_utf8(out.stdout).unwrap();
    let row = |name: &str| -> String {
        let line = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row {name}:\n{table}"));
        line.split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(row("memo__note_write"), "mcp:memo ask destructive hint");
    assert_eq!(row("trusted__note_write"), "mcp:trusted no");
    assert_eq!(row("memo__note_read"), "mcp:memo no");
    assert_eq!(row("memo__echo"), "mcp:memo ask config");
    assert!(
        !table.contains("__research"),
        "a task-only tool is left out:\n{table}"
    );

    // In the chat: the destructive tool asks, and a denied call never reaches the server.
    let mut c = tg_config(&tg, &llm, &data);
    c.mcp.servers = vec![sdk_stdio(
        "memo",
        &["--state", &state.display().to_string()],
    )];
    let app = App::start(c).await.expect("app starts");
    offered_soon(&Client::new(&app), &llm, "memo__note_write").await;
    let before = llm.request_count();
    llm.push(Step::ToolCall(
        "memo__note_write".into(),
        r#"{"text":"buy milk"}"#.into(),
    ));
    tg.push_private_text(USER, USER, "note: buy milk");
    wait_until("a question", WAIT, || async { tg.questions().len() == 1 }).await;
    let q = tg.questions()[0].clone();
    assert!(q.text.contains("memo__note_write"), "{}", q.text);
    tg.push_button_press(USER, USER, q.message_id, &q.deny);
    wait_until("the model hears the answer", WAIT, || async {
        llm.request_count() >= before + 2
    })
    .await;
    assert_eq!(
        llm.requests()[before + 1].last_tool_result(),
        "denied: denied by the person; the tool was not called"
    );
    assert!(!state.exists(), "a denied call reached the server");
    app.shutdown().await;
}

/// What Herald logs (info and up, plain text) while the guard lives, on this thread — the
/// test's runtime and the MCP session's tasks run there.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    fn lines_with(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }
}

/// The content type the server answers `initialize` with (to know which mode it runs in).
async fn answer_type(url: &str) -> String {
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}});
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .expect("the server answers");
    response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn a_task_only_tool_over_streamable_http_is_left_out_with_one_log_line() {
    init();
    for (extra, kind) in [
        (&[][..], "text/event-stream"),
        (&["--json-response"][..], "application/json"),
    ] {
        let sdk = HttpSdk::start_with(0, extra).await;
        assert!(answer_type(&sdk.url).await.starts_with(kind), "{kind}");
        let server = McpServer {
            name: "memo".into(),
            url: Some(sdk.url.parse().unwrap()),
            init_timeout_secs: 60,
            ..McpServer::default()
        };
        let tracker = tokio_util::task::TaskTracker::new();
        let (logs, guard) = Logs::capture();
        let conn = herald::agent::mcp::connect::connect(&server, &tracker)
            .await
            .expect("connects");
        let listed: Vec<&str> = conn.tools.iter().map(|t| t.name.as_ref()).collect();
        assert!(
            listed.contains(&"echo") && !listed.contains(&"research"),
            "{kind}: {listed:?}"
        );
        let (tools, _) = herald::agent::mcp::tools_of(&server, &conn);
        assert!(
            !tools.iter().any(|t| t.spec().name == "memo__research"),
            "{kind}: the model is not offered it"
        );
        let told = herald::agent::mcp::mcp_tool(&server, &conn, "echo")
            .unwrap()
            .call_full(r#"{"text":"still here"}"#)
            .await
            .expect("echo answers");
        assert_eq!(told.text, "still here", "{kind}");
        conn.close().await;
        drop(guard);
        let lines = logs.lines_with("requires task augmentation");
        assert_eq!(lines.len(), 1, "{kind}: {lines:?}");
        assert!(
            lines[0].contains("server=memo") && lines[0].contains("tool=research"),
            "{kind}: {lines:?}"
        );
    }
}

#[tokio::test]
async fn a_server_asking_the_person_through_elicitation_is_declined_with_one_log_line() {
    init();
    let stdio = sdk_stdio("memo", &[]);
    let sdk = HttpSdk::start(0).await;
    let http = McpServer {
        name: "memo".into(),
        url: Some(sdk.url.parse().unwrap()),
        init_timeout_secs: 60,
        ..McpServer::default()
    };
    for server in [stdio, http] {
        let how = if server.url.is_some() {
            "http"
        } else {
            "stdio"
        };
        let tracker = tokio_util::task::TaskTracker::new();
        let (logs, guard) = Logs::capture();
        let conn = herald::agent::mcp::connect::connect(&server, &tracker)
            .await
            .expect("connects");
        let tool = herald::agent::mcp::mcp_tool(&server, &conn, "confirm").expect("confirm");
        let told = tool
            .call_full(r#"{"order":"A-1001"}"#)
            .await
            .expect("a result");
        assert_eq!(
            told.text, "the client answered decline; order A-1001 not placed",
            "{how}"
        );
        conn.close().await;
        drop(guard);
        let lines = logs.lines_with("elicitation");
        assert_eq!(lines.len(), 1, "{how}: {lines:?}");
        assert!(
            lines[0].contains("declined")
                && lines[0].contains("server=memo")
                && lines[0].contains("Place order A-1001?"),
            "{how}: {lines:?}"
        );
    }
}
