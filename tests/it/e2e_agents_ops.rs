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
use herald::config::{AgentSpec, Binding, Config, PriceConfig};
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, test_config, Client};

/// A call's bill, in billionths.
const BILL: i64 = 8_000_000;

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
    f(&mut config);
    (App::start(config.clone()).await.unwrap(), config)
}

async fn say(client: &Client, lane: &str, text: &str) -> String {
    let sender = lane.trim_start_matches("web:");
    let (status, body) = client
        .chat_body(serde_json::json!({"lane": lane, "text": text, "sender": sender}))
        .await;
    assert_eq!(status, 200, "{body}");
    body["reply"].as_str().unwrap_or_default().to_string()
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
    app.shutdown().await;
}
