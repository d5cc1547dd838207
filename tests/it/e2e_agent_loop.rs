//! The agent loop end to end: tool calls of one answer side by side (timed by the MCP test
//! server's own clock, not by the test's), and child agents (`delegate`) against the fake
//! model: what a child is sent, what the parent gets back, a batch running at once, a child
//! stopped at its own cap, and a crash mid-delegation reported instead of repeated.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use herald::app::App;
use herald::config::{Config, McpServer, SendRoute};
use herald_test_support::db::Db;
use herald_test_support::fake_llm::{FakeLlm, Recorded, Step};
use herald_test_support::harness::{init, test_config, wait_until, Client};
use herald_test_support::mcp::{stdio_server, HttpShop};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);

/// The core on `db` with the fake model; `tune` adjusts the config first.
async fn start(db: &Db, tune: impl FnOnce(&mut Config)) -> (FakeLlm, tempfile::TempDir, App) {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let mut c = test_config(&llm, &data);
    c.cron.enabled = false;
    db.apply(&mut c);
    tune(&mut c);
    let app = App::start(c).await.expect("app starts");
    (llm, data, app)
}

/// Asks until the model is offered `tool` (an MCP server's tools arrive after its handshake).
async fn offered(client: &Client, llm: &FakeLlm, lane: &str, tool: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        client.chat(lane, "ping").await;
        if llm.last_request().tools().iter().any(|t| t == tool) {
            return;
        }
        assert!(Instant::now() < deadline, "{tool} was never offered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `label -> (name, start, end)` from the shop's `--spans` file (its own wall clock).
fn spans(path: &Path) -> HashMap<String, (String, f64, f64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (
                f[1].to_string(),
                (
                    f[0].to_string(),
                    f[2].parse().unwrap(),
                    f[3].parse().unwrap(),
                ),
            )
        })
        .collect()
}

fn call(name: &str, args: Value) -> (String, String) {
    (name.to_string(), args.to_string())
}

/// The tool results of a request after its last assistant message: (call id, text).
fn results(r: &Recorded) -> Vec<(String, String)> {
    let msgs = r.messages();
    let last = msgs.iter().rposition(|m| m["role"] == "assistant").unwrap();
    msgs[last..]
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn reads_overlap_and_a_writer_between_them_is_a_barrier(db: Db) {
    let dir = tempfile::tempdir().unwrap();
    let spans_file = dir.path().join("spans");
    let shop = HttpShop::start_with(None, &["--spans", &spans_file.display().to_string()]).await;
    let url = shop.url.clone();
    let (llm, _data, app) = start(&db, |c| {
        c.mcp.servers = vec![McpServer {
            name: "shop".into(),
            url: Some(url.parse().unwrap()),
            ..McpServer::default()
        }];
    })
    .await;
    let client = Client::new(&app);
    offered(&client, &llm, "web:shelves", "shop__peek").await;

    // a finishes after b; c writes; d and e read again after it.
    let ask = "sort the shelves";
    let peek = |label: &str, s: f64| call("shop__peek", json!({"label": label, "seconds": s}));
    llm.push_when(
        ask,
        Step::ToolCalls(vec![
            peek("a", 0.8),
            peek("b", 0.3),
            call("shop__stamp", json!({"label": "c", "seconds": 0.2})),
            peek("d", 0.4),
            peek("e", 0.4),
        ]),
    );
    llm.push_when(ask, Step::Reply("Sorted.".into()));
    let (status, body) = client.chat("web:shelves", ask).await;
    assert_eq!((status, body["reply"].as_str()), (200, Some("Sorted.")));

    let s = spans(&spans_file);
    let [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map(|l| s[l].clone());
    assert_eq!(c.0, "stamp");
    let overlap = |x: &(String, f64, f64), y: &(String, f64, f64)| x.1 < y.2 && y.1 < x.2;
    assert!(
        overlap(&a, &b),
        "two reads emitted together ran at once: {s:?}"
    );
    assert!(overlap(&d, &e), "and again after the write: {s:?}");
    assert!(
        c.1 >= a.2 && c.1 >= b.2,
        "the write began after both reads ended: {s:?}"
    );
    assert!(
        d.1 >= c.2 && e.1 >= c.2,
        "the reads after it began after it ended: {s:?}"
    );
    // The next request holds the results in emission order, each under its own call id,
    // though b finished before a.
    let next = llm.last_request();
    assert_eq!(
        results(&next),
        [
            ("call_1", "peek a done"),
            ("call_2", "peek b done"),
            ("call_3", "stamp c done"),
            ("call_4", "peek d done"),
            ("call_5", "peek e done"),
        ]
        .map(|(i, t)| (i.to_string(), t.to_string()))
    );
    app.shutdown().await;
}

herald_test_support::on_each_backend!(
    side_by_side_sqlite,
    side_by_side_postgres,
    reads_overlap_and_a_writer_between_them_is_a_barrier
);

const GOALS: [&str; 3] = [
    "check the weather in Oslo",
    "check the trains to Bergen",
    "check the hotels in Bergen",
];

/// The requests one child agent sent (its user message is its goal).
fn child_requests(llm: &FakeLlm, goal: &str) -> Vec<Recorded> {
    llm.requests()
        .into_iter()
        .filter(|r| r.last_user() == goal)
        .collect()
}

async fn a_batch_of_children_runs_at_once_and_the_parent_gets_only_their_summaries(db: Db) {
    let (llm, _data, app) = start(&db, |c| {
        c.tools.send_message_routes = vec![SendRoute {
            from: "*".into(),
            to: vec!["web:elsewhere".into()],
        }];
        c.mcp.servers = vec![stdio_server("shop", "normal", &[])];
    })
    .await;
    let client = Client::new(&app);
    offered(&client, &llm, "web:trip", "shop__delete_order").await;
    client.chat("web:trip", "I travel on Friday.").await;

    let ask = "plan the trip";
    llm.push_when(
        ask,
        Step::ToolCall(
            "delegate".into(),
            json!({"goals": GOALS, "context": "The person travels on Friday."}).to_string(),
        ),
    );
    for (i, g) in GOALS.iter().enumerate() {
        llm.push_when(
            g,
            Step::Delay(
                Duration::from_millis(500),
                Box::new(Step::Reply(format!("summary {i}: all fine"))),
            ),
        );
    }
    llm.push_when(ask, Step::Reply("Here is the plan.".into()));
    let (status, body) = client.chat("web:trip", ask).await;
    assert_eq!(
        (status, body["reply"].as_str()),
        (200, Some("Here is the plan."))
    );

    let parent = llm
        .requests()
        .into_iter()
        .find(|r| r.last_user() == ask)
        .unwrap();
    for t in [
        "delegate",
        "cron",
        "memory",
        "send_message",
        "shop__delete_order",
    ] {
        assert!(
            parent.tools().contains(&t.to_string()),
            "the parent has {t}"
        );
    }
    let mut children = Vec::new();
    for g in GOALS {
        let reqs = child_requests(&llm, g);
        assert_eq!(reqs.len(), 1, "one model turn for {g}");
        let r = reqs[0].clone();
        // A fresh conversation: its prompt and its goal, none of the parent's history.
        assert_eq!(r.messages().len(), 2, "{:?}", r.messages());
        assert!(r.system().contains(g) && r.system().contains("travels on Friday"));
        let sent = r.body.to_string();
        assert!(
            !sent.contains("I travel on Friday") && !sent.contains(ask),
            "{sent}"
        );
        let tools = r.tools();
        for t in [
            "delegate",
            "cron",
            "memory",
            "send_message",
            "attach_file",
            "shop__delete_order",
        ] {
            assert!(
                !tools.contains(&t.to_string()),
                "a child has no {t}: {tools:?}"
            );
        }
        assert!(
            tools.contains(&"session_search".to_string())
                && tools.contains(&"shop__lookup_order".to_string())
        );
        children.push(r);
    }
    // The three were at the model at the same time.
    let latest_start = children.iter().map(|r| r.started).max().unwrap();
    let first_end = children.iter().map(|r| r.finished.unwrap()).min().unwrap();
    assert!(latest_start < first_end, "the batch ran side by side");

    // The parent's next request holds the summaries, in goal order, and nothing of the
    // children's own requests.
    let last = llm.last_request();
    assert_eq!(last.last_user(), ask);
    let result: Value = serde_json::from_str(&last.last_tool_result()).unwrap();
    let summaries: Vec<&str> = result["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["summary"].as_str().unwrap())
        .collect();
    assert_eq!(
        summaries,
        [
            "summary 0: all fine",
            "summary 1: all fine",
            "summary 2: all fine"
        ]
    );
    assert!(result["note"]
        .as_str()
        .unwrap()
        .contains("not a verified fact"));
    assert!(!last.body.to_string().contains("You are a child agent"));
    app.shutdown().await;
}

herald_test_support::on_each_backend!(
    delegate_batch_sqlite,
    delegate_batch_postgres,
    a_batch_of_children_runs_at_once_and_the_parent_gets_only_their_summaries
);

#[tokio::test]
async fn a_runaway_child_stops_at_its_own_cap() {
    let (llm, _data, app) = start(&Db::Sqlite, |c| c.tools.delegate_max_iterations = 2).await;
    let client = Client::new(&app);
    let (ask, goal) = ("dig through the archive", "search the archive for invoices");
    llm.push_when(
        ask,
        Step::ToolCall("delegate".into(), json!({"goal": goal}).to_string()),
    );
    for i in 0..2 {
        llm.push_when(
            goal,
            Step::ToolCall(
                "session_search".into(),
                json!({"query": format!("invoice {i}")}).to_string(),
            ),
        );
    }
    llm.push_when(
        goal,
        Step::Reply("Found nothing before my step limit.".into()),
    );
    llm.push_when(ask, Step::Reply("Nothing in the archive.".into()));
    let (_, body) = client.chat("web:archive", ask).await;
    assert_eq!(body["reply"], "Nothing in the archive.");

    let reqs = child_requests(&llm, goal);
    let offered: Vec<bool> = reqs.iter().map(|r| !r.tools().is_empty()).collect();
    // Two turns with tools (its cap), then one without: it must answer.
    assert_eq!(offered, [true, true, false]);
    assert!(llm
        .last_request()
        .last_tool_result()
        .contains("Found nothing before my step limit."));
    app.shutdown().await;
}

#[tokio::test]
async fn delegate_off_is_not_offered() {
    let (llm, _data, app) = start(&Db::Sqlite, |c| c.tools.delegate = false).await;
    let client = Client::new(&app);
    client.chat("web:off", "hello").await;
    assert!(!llm.last_request().tools().contains(&"delegate".to_string()));
    app.shutdown().await;
}

#[tokio::test]
async fn a_crash_mid_delegation_is_reported_not_run_twice() {
    use herald_test_support::harness::{free_port, wait_for};
    use herald_test_support::herald::Herald;
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let client = Client::for_addr(&format!("127.0.0.1:{port}"));
    let spawn = || {
        Herald::serve(port, data.path())
            .fake_model(&llm.base_url())
            .env("HERALD_LLM__TIMEOUT_SECS", "60")
            .fast_leases()
            .env("HERALD_LOG__LEVEL", "warn")
            .spawn()
    };
    let (ask, goal) = ("count the crates", "count the crates in hall 4");
    let delegate = Step::ToolCall("delegate".into(), json!({"goal": goal}).to_string());
    llm.push_when(ask, delegate.clone());
    llm.push_when(goal, Step::Hang);
    llm.push_when(ask, delegate);
    llm.push_when(
        ask,
        Step::Reply("I cannot tell how many crates there are.".into()),
    );

    let mut first = spawn();
    first.wait_ready(WAIT).await;
    let base = client.base.clone();
    let pending = tokio::spawn(async move {
        let _ = reqwest::Client::new()
            .post(format!("{base}/api/v1/chat"))
            .json(&json!({"lane": "web:crates", "text": ask}))
            .send()
            .await;
    });
    wait_until("the child reaches the model", WAIT, || async {
        !child_requests(&llm, goal).is_empty()
    })
    .await;
    first.kill();
    pending.abort();

    let mut second = spawn();
    second.wait_ready(WAIT).await;
    let transcript = wait_for("an answer after the restart", WAIT, async || {
        let t = client.transcript("web:crates").await;
        t.iter()
            .any(|(role, text)| role == "assistant" && text.starts_with("I cannot tell"))
            .then_some(t)
    })
    .await;
    second.kill();
    assert_eq!(child_requests(&llm, goal).len(), 1, "the child ran once");
    let told = llm.last_request().last_tool_result();
    assert!(told.contains("outcome is unknown"), "{told}");
    let answers = transcript
        .iter()
        .filter(|(role, text)| role == "assistant" && text.starts_with("I cannot tell"))
        .count();
    assert_eq!(answers, 1, "{transcript:?}");
}
