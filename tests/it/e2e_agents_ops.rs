//! Issue 49, the operator's side of several agents: an agent's own daily cap refuses that
//! agent's turns while another agent still answers; every spend row carries its agent and
//! `herald usage --by agent` groups by it; `delegate` to a named agent runs that agent's model
//! under the caller's meter; the metrics page labels turns with their agent; `herald doctor`
//! prints the routing table and flags a binding another one shadows.
//!
//! Prices as in e2e_budget: the fake bills 8 output tokens per call at 1,000 per million
//! (0.008 a call) and, with `llm.max_tokens = 100`, a call reserves 0.1 first.

use herald::app::App;
use herald::budget::report::By;
use herald::cli::UsageArgs;
use herald::config::{AgentBudget, AgentSpec, Binding, Config, PriceConfig};
use herald::store::SpendScope;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config, Client};
use serde_json::{json, Value};

/// A call's bill, in billionths.
const BILL: i64 = 8_000_000;
/// `web.token`: the chat and the admin API are called with it.
const TOKEN: &str = "ops-test-token";

/// The default agent on `fake-model`; `coder` on `fake-coder`, bound to the web chat `bob`.
fn agents(config: &mut Config, coder: impl FnOnce(&mut AgentSpec)) {
    config.llm.max_tokens = 100;
    config.budget.prices = vec![PriceConfig {
        model: "fake-*".into(),
        input: Some(0.0),
        output: Some(1000.0),
        cache_read: Some(0.0),
        cache_write: Some(0.0),
    }];
    let mut spec = AgentSpec {
        name: "coder".into(),
        description: Some("writes code".into()),
        model: Some("fake-coder".into()),
        system_message: Some("You are the coding agent.".into()),
        ..AgentSpec::default()
    };
    coder(&mut spec);
    config.agents = vec![spec];
    config.bindings = vec![Binding {
        agent: "coder".into(),
        platform: Some("web".into()),
        chat: Some("bob".into()),
        ..Binding::default()
    }];
}

async fn start(
    llm: &FakeLlm,
    data: &tempfile::TempDir,
    f: impl FnOnce(&mut Config),
) -> (App, Config) {
    init();
    let mut config = test_config(llm, data);
    config.cron.enabled = false;
    config.web.token = Some(herald::config::Secret::new(TOKEN));
    f(&mut config);
    (App::start(config.clone()).await.unwrap(), config)
}

async fn call(client: &Client, path: &str, body: Option<Value>) -> (u16, String) {
    let url = format!("{}{path}", client.base);
    let http = reqwest::Client::new();
    let req = match body {
        Some(b) => http.post(url).json(&b),
        None => http.get(url),
    };
    let r = req.bearer_auth(TOKEN).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn say(client: &Client, lane: &str, text: &str) -> String {
    say_as(client, lane, lane.trim_start_matches("web:"), text).await
}

async fn say_as(client: &Client, lane: &str, sender: &str, text: &str) -> String {
    let body = json!({"lane": lane, "text": text, "sender": sender});
    let (status, body) = call(client, "/api/v1/chat", Some(body)).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["reply"].as_str().unwrap_or_default().to_string()
}

fn models(llm: &FakeLlm) -> Vec<String> {
    llm.requests()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agents_daily_cap_refuses_its_turns_while_another_agent_answers() {
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    // 0.105: the first call's 0.1 hold fits, the second (0.008 spent + 0.1) does not.
    let (app, config) = start(&llm, &data, |c| agents(c, |a| a.budget.daily = Some(0.105))).await;
    let client = Client::new(&app);
    assert_eq!(say(&client, "web:bob", "one").await, "reply to: one");
    let refused = say(&client, "web:bob", "two").await;
    assert!(
        refused.starts_with("The agent coder has spent its budget for today"),
        "{refused}"
    );
    assert!(refused.contains("It resets at "), "{refused}");
    assert_eq!(
        models(&llm),
        ["fake-coder"],
        "the model heard a refused turn"
    );
    // The default agent's day is its own: the global caps are off, the coder's do not apply.
    assert_eq!(say(&client, "web:ann", "hello").await, "reply to: hello");
    assert_eq!(models(&llm), ["fake-coder", "fake-model"]);

    // Every row carries its agent, and `herald usage --by agent` groups by it.
    let rows = app.store.spend_rows(0).await.unwrap();
    let agents: Vec<(&str, &str, Option<i64>)> = rows
        .iter()
        .map(|r| (r.agent.as_str(), r.lane.as_str(), r.cost))
        .collect();
    assert_eq!(
        agents,
        [
            ("coder", "web:bob", Some(BILL)),
            ("default", "web:ann", Some(BILL))
        ]
    );
    let args = UsageArgs {
        by: By::Agent,
        since: None,
        json: false,
    };
    let since = herald::cli::usage::since(&config, &args, chrono::Utc::now()).unwrap();
    let table = herald::cli::usage::report(app.store.as_ref(), &config, &args, since)
        .await
        .unwrap();
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0][0], "agent", "{table}");
    assert_eq!(&lines[1][..3], ["coder", "0.0080", "USD"], "{table}");
    assert_eq!(&lines[2][..3], ["default", "0.0080", "USD"], "{table}");
    assert_eq!(lines.len(), 3, "{table}");

    // `/usage` splits the person's spending by agent.
    let usage = say(&client, "web:bob", "/usage").await;
    assert!(
        usage.contains("- with the agent coder: 0.0080 USD"),
        "{usage}"
    );
    // The metrics page labels turns with their agent; the admin API says each session's.
    let (_, metrics) = call(&client, "/metrics", None).await;
    for agent in ["coder", "default"] {
        let label = format!("agent=\"{agent}\"");
        for name in ["herald_turns_total{", "herald_turn_duration_seconds_count{"] {
            assert!(
                metrics
                    .lines()
                    .any(|l| l.starts_with(name) && l.contains(&label)),
                "{name} {label}: {metrics}"
            );
        }
    }
    let (status, body) = call(&client, "/api/v1/admin/sessions", None).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let mut sessions: Vec<(String, String)> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["lane"].as_str().unwrap().into(),
                s["agent"].as_str().unwrap().into(),
            )
        })
        .collect();
    sessions.sort();
    assert_eq!(
        sessions,
        [
            ("web:ann".to_string(), "default".to_string()),
            ("web:bob".to_string(), "coder".to_string())
        ]
    );
    app.shutdown().await;

    // `herald sessions list` (the real binary, on the same data dir) names each one's agent.
    let out = herald_test_support::herald::Herald::new()
        .args([
            "sessions",
            "list",
            "--data-dir",
            data.path().to_str().unwrap(),
        ])
        .output();
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    for (lane, agent) in [("web:bob", "coder"), ("web:ann", "default")] {
        assert!(
            listed
                .lines()
                .any(|l| l.contains(&format!("  {lane}  agent {agent}  started "))),
            "{listed}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `delegate` with `agent`: the child's request goes to that agent's model with its prompt,
/// and what it costs lands on the caller's agent (its rows and its cap), not the target's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delegate_to_a_named_agent_runs_its_model_on_the_callers_budget() {
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let (app, _) = start(&llm, &data, |c| {
        agents(c, |_| {});
        c.agents.push(AgentSpec {
            name: "lead".into(),
            model: Some("fake-lead".into()),
            budget: AgentBudget {
                daily: Some(1.0),
                person_daily: None,
            },
            ..AgentSpec::default()
        });
        c.bindings.push(Binding {
            agent: "lead".into(),
            platform: Some("web".into()),
            chat: Some("lee".into()),
            ..Binding::default()
        });
    })
    .await;
    let client = Client::new(&app);
    let (ask, goal) = ("fix the build", "find why the build fails");
    let delegate = |agent: &str| {
        Step::ToolCall(
            "delegate".into(),
            json!({ "goal": goal, "agent": agent }).to_string(),
        )
    };
    // First an agent that does not exist: a tool error naming the agents there are.
    llm.push_when(ask, delegate("nobody"));
    llm.push_when(ask, delegate("coder"));
    llm.push_when(goal, Step::Reply("A missing semicolon.".into()));
    llm.push_when(ask, Step::Reply("The coder says: a semicolon.".into()));
    assert_eq!(
        say(&client, "web:lee", ask).await,
        "The coder says: a semicolon."
    );
    let requests = llm.requests();
    assert_eq!(
        models(&llm),
        ["fake-lead", "fake-lead", "fake-coder", "fake-lead"]
    );
    let refused = requests[1].last_tool_result();
    assert!(
        refused.contains("there is no agent \"nobody\"; the agents are: default, coder, lead"),
        "{refused}"
    );
    // The tool's description lists the agents; the child has the coder's prompt.
    let tools = requests[0].body["tools"].to_string();
    assert!(
        tools.contains("coder (writes code (openai:fake-coder))"),
        "{tools}"
    );
    let child = requests[2].system();
    assert!(child.starts_with("You are the coding agent."), "{child}");
    assert!(child.contains(goal), "{child}");
    // Every call is the lead's: its rows, its day (under its cap), its turn's cost.
    let rows = app.store.spend_rows(0).await.unwrap();
    let seen: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r.agent.as_str(), r.cause.as_str(), r.model.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("lead", "turn", "fake-lead"),
            ("lead", "turn", "fake-lead"),
            ("lead", "child", "fake-coder"),
            ("lead", "turn", "fake-lead"),
        ]
    );
    let day = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let sum = |agent: &str| SpendScope::AgentDay {
        agent: agent.into(),
        day: day.clone(),
    };
    assert_eq!(app.store.spend_sum(&sum("lead")).await.unwrap(), 4 * BILL);
    assert_eq!(app.store.spend_sum(&sum("coder")).await.unwrap(), 0);
    app.shutdown().await;
}

/// `herald doctor` (the real binary) prints the routing table in match order and flags a
/// binding that repeats an earlier one's keys and an agent nothing reaches.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn doctor_prints_the_routing_table_and_flags_an_overlap() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("herald.toml");
    let toml = format!(
        r#"[server]
data_dir = {data:?}

[llm]
provider = "openai"
base_url = "{url}"
model = "fake-model"

[[agents]]
name = "coder"
model = "fake-coder"

[[agents]]
name = "family"

[[agents]]
name = "lonely"

[[bindings]]
agent = "family"
platform = "telegram"
chat_type = "group"

[[bindings]]
agent = "coder"
platform = "telegram"
chat = "-100"

[[bindings]]
agent = "coder"
platform = "telegram"
chat_type = "group"
"#,
        data = data.path().display().to_string(),
        url = llm.base_url()
    );
    std::fs::write(&file, toml).unwrap();
    let out = herald_test_support::herald::Herald::new()
        .args(["doctor", "--config", file.to_str().unwrap()])
        .env("OPENAI_API_KEY", "sk-doctor")
        .output();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let table = [
        "✓ routing: the routing table, in match order:",
        "  1. bindings[1]: platform=telegram chat=-100 → coder",
        "  2. bindings[0]: platform=telegram chat_type=group → family",
        "  3. bindings[2]: platform=telegram chat_type=group → coder",
        "  otherwise → default",
    ]
    .join("\n");
    assert!(text.contains(&table), "{text}");
    assert!(
        text.contains(
            "! routing: bindings[2] (platform=telegram chat_type=group → coder) has the same \
             keys as bindings[0] (platform=telegram chat_type=group → family), so it is \
             unreachable"
        ),
        "{text}"
    );
    assert!(
        text.contains("! routing: agent \"lonely\": no binding routes to it"),
        "{text}"
    );
}

/// An agent's `person_daily` holds one person back with that agent while another person in the
/// same chat still gets answers; a reload raising the cap lets the first person on at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agents_person_cap_holds_one_person_and_a_reload_raises_it() {
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let (app, config) = start(&llm, &data, |c| {
        agents(c, |a| a.budget.person_daily = Some(0.105))
    })
    .await;
    let client = Client::new(&app);
    assert_eq!(say(&client, "web:bob", "one").await, "reply to: one");
    let refused = say(&client, "web:bob", "two").await;
    assert!(
        refused.starts_with("You have reached your daily budget with the agent coder"),
        "{refused}"
    );
    assert_eq!(
        say_as(&client, "web:bob", "carl", "mine").await,
        "reply to: mine"
    );
    assert_eq!(llm.request_count(), 2);
    let usage = say(&client, "web:bob", "/usage").await;
    assert!(
        usage.contains("Your daily budget with the agent coder: 0.0080 USD of 0.10 USD spent"),
        "{usage}"
    );

    let mut next = config.clone();
    next.agents[0].budget.person_daily = Some(1.0);
    app.reload.apply(next).await.expect("a valid reload");
    assert_eq!(say(&client, "web:bob", "three").await, "reply to: three");
    app.shutdown().await;
}
