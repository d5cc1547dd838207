//! Cache-plan benchmark: the share of prompt tokens read from Anthropic's prompt cache over a
//! 20-turn conversation with a tool-using turn in the middle, against the fake Messages API
//! (its billing simulates caching by breakpoint prefixes), with no breakpoints, with one on the
//! system prompt only, and with the full plan (system + the last three boundaries).
//!
//! Run: `cargo run --example bench_cache_plan`. Prints a table and writes
//! `bench-results/cache_plan.txt`. The "relative cost" weighs tokens like Anthropic's price
//! list for the 5-minute cache: a read 0.1, a write 1.25, fresh input 1.

use std::fmt::Write as _;
use std::time::Duration;

use herald::domain::{Role, ToolCall};
use herald::llm::{AnthropicProvider, CachePlan, ChatMessage, ChatRequest, Provider, ToolSpec};
use herald_test_support::fake_anthropic::{Bill, FakeAnthropic, Step, KEY};
use serde_json::json;

const TURNS: usize = 20;
const TOOL_TURN: usize = 10;

fn system_prompt() -> String {
    let mut s = String::from("You are Herald, a careful assistant.\n");
    for i in 0..60 {
        let _ = writeln!(
            s,
            "Rule {i}: answer plainly, cite the files you read, never guess."
        );
    }
    s
}

fn tools() -> Vec<ToolSpec> {
    ["session_search", "memory", "read_file"]
        .iter()
        .map(|n| ToolSpec {
            name: n.to_string(),
            description: format!("The {n} tool: looks things up for the agent."),
            parameters: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
        })
        .collect()
}

/// Runs the conversation under `plan`; returns the summed bill and the per-request bills.
async fn run(plan: CachePlan) -> (Bill, Vec<Bill>) {
    let fake = FakeAnthropic::start().await;
    let provider = AnthropicProvider::new(
        &fake.base_url(),
        Some(herald::config::Secret::new(KEY.to_string())),
        "bench",
        "claude-fake",
        1024,
        Duration::from_secs(10),
    )
    .expect("client")
    .with_cache_plan(plan);
    let mut history = vec![ChatMessage::new(Role::System, system_prompt())];
    let tools = tools();
    for turn in 0..TURNS {
        let question = format!(
            "Question {turn}: {}",
            "what changed in the deploy since yesterday, and why? ".repeat(6)
        );
        history.push(ChatMessage::new(Role::User, question));
        if turn == TOOL_TURN {
            fake.push(Step::tool("read_file", r#"{"query":"deploy.log"}"#));
        }
        loop {
            let req = ChatRequest {
                messages: history.clone(),
                tools: tools.clone(),
            };
            let resp = provider.chat(&req).await.expect("the fake answers");
            if resp.tool_calls.is_empty() {
                history.push(ChatMessage::new(
                    Role::Assistant,
                    resp.content.unwrap_or_default(),
                ));
                break;
            }
            let calls: Vec<ToolCall> = resp.tool_calls.clone();
            history.push(ChatMessage::tool_calls(resp.content, calls.clone()));
            for c in calls {
                let log = "2026-12-01 deploy web-3 ok; health 200; latency p99 140ms\n".repeat(40);
                history.push(ChatMessage::tool_result(&c.id, log));
            }
        }
    }
    let bills: Vec<Bill> = fake.requests().iter().map(|r| r.bill).collect();
    (fake.billed(), bills)
}

fn cost(b: &Bill) -> f64 {
    b.input as f64 + 0.1 * b.cache_read as f64 + 1.25 * b.cache_write as f64
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{TURNS}-turn conversation, tool call in turn {TOOL_TURN}, fake Messages API billing\n"
    );
    let _ = writeln!(
        out,
        "{:<12} {:>9} {:>10} {:>11} {:>10} {:>11} {:>13}",
        "plan", "requests", "prompt", "cache_read", "writes", "read share", "relative cost"
    );
    let (off, _) = run(CachePlan::Off).await;
    for (name, plan) in [
        ("none", CachePlan::Off),
        ("system only", CachePlan::SystemOnly),
        ("full plan", CachePlan::Full),
    ] {
        let (b, bills) = run(plan).await;
        let _ = writeln!(
            out,
            "{:<12} {:>9} {:>10} {:>11} {:>10} {:>10.1}% {:>13.3}",
            name,
            bills.len(),
            b.prompt(),
            b.cache_read,
            b.cache_write,
            100.0 * b.cache_read as f64 / b.prompt().max(1) as f64,
            cost(&b) / cost(&off).max(1.0),
        );
        if plan == CachePlan::Full {
            let shares: Vec<String> = bills
                .iter()
                .map(|b| {
                    format!(
                        "{:.0}",
                        100.0 * b.cache_read as f64 / b.prompt().max(1) as f64
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "\nfull plan, read share per request (%): {}",
                shares.join(" ")
            );
        }
    }
    print!("{out}");
    std::fs::create_dir_all("bench-results")?;
    std::fs::write("bench-results/cache_plan.txt", &out)?;
    println!("wrote bench-results/cache_plan.txt");
    Ok(())
}
