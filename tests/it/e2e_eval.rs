//! `herald eval`, `herald export` and `herald replay` as an operator runs them: the real binary
//! against the instant fake model served in this process, case files on disk, and what the
//! operator reads — the table, the exit status, the JSON and JUnit files, the exported case
//! file, the replay's turns and deltas.

mod export;

use std::path::Path;
use std::process::Output;
use std::time::Instant;

use herald_test_support::fake_llm::{Billing, FakeLlm, Step};
use herald_test_support::harness;
use herald_test_support::herald::{write_config, Herald};
use serde_json::Value;

/// Prices (per million tokens) that make the fake's 120 input and 8 output tokens cost
/// 0.000136 USD a call.
const PRICED: &str = "[[budget.prices]]\nmodel = \"fake-model\"\ninput = 1.0\noutput = 2.0\n\n";

fn herald(config: &Path, args: &[&str]) -> Output {
    Herald::new()
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const SUITE: &str = r#"
[[cases]]
name = "greets"
[[cases.messages]]
person = "alice"
text = "hello there"
[cases.expect]
reply_contains = "hello there"
reply_not_contains = "goodbye"
reply_matches = "^reply to: "
no_tool = true
approval_asked = false
max_input_tokens = 200
max_cost = 0.01
max_latency_ms = 60000

[[cases]]
name = "wrong words"
[[cases.messages]]
person = "alice"
text = "good morning"
[cases.expect]
reply_contains = ["Paris", "morning"]
reply_not_contains = "good"
reply_matches = "^bonjour"

[[cases]]
name = "looks it up"
[[cases.messages]]
platform = "web"
person = "bob"
text = "look up my invoice"
[cases.expect]
tool_called = [{ name = "session_search", arguments = "invoice" }]

[[cases]]
name = "wrong arguments"
[[cases.messages]]
person = "bob"
text = "look up my receipt"
[cases.expect]
tool_called = [{ name = "session_search", arguments = "invoice" }, "delegate"]

[[cases]]
name = "tool where none should be"
[[cases.messages]]
person = "carol"
text = "search for the parcel"
[cases.expect]
no_tool = true

[[cases]]
name = "asks before delegating"
[[cases.messages]]
person = "dan"
text = "delegate the report"
[cases.expect]
approval_asked = true
tool_called = "delegate"

[[cases]]
name = "memory is not allowed"
[[cases.messages]]
person = "ivy"
text = "remember my notes"
[cases.expect]
tool_called = "memory"

[[cases]]
name = "reads the attachment"
[[cases.messages]]
person = "jo"
text = "what does the file say?"
attachments = ["notes.txt"]
[cases.expect]
reply_contains = "ZEBRA-42"

[[cases]]
name = "asks nothing"
[[cases.messages]]
person = "dan"
text = "just chat"
[cases.expect]
approval_asked = true

[[cases]]
name = "capsule keeps the order"
[[cases.messages]]
person = "erin"
text = "my order number is ORD-4471"
[[cases.messages]]
person = "erin"
text = "it has not arrived"
[[cases.messages]]
person = "erin"
text = "handoff"
[cases.expect]
capsule_contains = "ORD-4471"

[[cases]]
name = "capsule lacks it"
[[cases.messages]]
person = "fay"
text = "nothing to note"
[[cases.messages]]
person = "fay"
text = "still nothing"
[[cases.messages]]
person = "fay"
text = "handoff"
[cases.expect]
capsule_contains = "ORD-9999"

[[cases]]
name = "over the caps"
[[cases.messages]]
person = "gus"
text = "an expensive question"
[cases.expect]
max_cost = 0.0000001
max_input_tokens = 10
max_latency_ms = 0

[[cases]]
name = "judged polite"
[[cases.messages]]
person = "hal"
text = "thank you"
[cases.expect]
judge = "Is the reply polite?"

[[cases]]
name = "judged french"
[[cases.messages]]
person = "hal"
text = "merci"
[cases.expect]
judge = "Is the reply in Spanish?"
"#;

/// The model's scripted answers for the suite: keyed by the person's words, so cases may run
/// in any order and at once.
fn script(llm: &FakeLlm) {
    let call = |args: &str| Step::ToolCall("session_search".into(), args.into());
    llm.push_when("look up my invoice", call(r#"{"query":"invoice"}"#));
    llm.push_when("look up my receipt", call(r#"{"query":"receipt"}"#));
    llm.push_when("search for the parcel", call(r#"{"query":"parcel"}"#));
    llm.push_when(
        "remember my notes",
        Step::ToolCall(
            "memory".into(),
            r#"{"action":"add","target":"user","content":"n"}"#.into(),
        ),
    );
    llm.push_when(
        "delegate the report",
        Step::ToolCall("delegate".into(), r#"{"goal":"write the report"}"#.into()),
    );
}

/// The judge's answers, on its own endpoint (`[[eval.judge]]`).
fn judge_script(judge: &FakeLlm) {
    judge.push_when("Question: Is the reply polite?", Step::Reply("Yes.".into()));
    judge.push_when(
        "Question: Is the reply in Spanish?",
        Step::Reply("No, French.".into()),
    );
}

fn result<'a>(json: &'a Value, name: &str) -> &'a Value {
    json.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no result for {name}: {json}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suite_passes_and_fails_each_expectation_with_reports_and_exit_status() {
    harness::init();
    let llm = FakeLlm::start().await;
    llm.set_billing(Billing::Fixed(120));
    script(&llm);
    let judge = FakeLlm::start().await;
    judge_script(&judge);
    let data = tempfile::tempdir().unwrap();
    let extra = format!(
        "[tools]\nrequire_approval = [\"delegate\"]\n\n{PRICED}\
         [[eval.judge]]\nbase_url = \"{}\"\nmodel = \"judge-model\"\n",
        judge.base_url()
    );
    let cfg = write_config(data.path(), "127.0.0.1:0", &llm.base_url(), &extra);
    let suite = data.path().join("suite.toml");
    std::fs::write(&suite, SUITE).unwrap();
    std::fs::write(data.path().join("notes.txt"), "The code is ZEBRA-42.\n").unwrap();
    let reports = data.path().join("reports");
    let out = herald(
        &cfg,
        &[
            "eval",
            suite.to_str().unwrap(),
            "--report",
            reports.to_str().unwrap(),
            "--allow-tools",
            "session_search",
            "--jobs",
            "4",
        ],
    );
    let (table, log) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{table}\n{log}");
    assert!(
        table.contains("14 cases: 7 passed, 7 failed"),
        "{table}\n{log}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(reports.join("eval.json")).unwrap()).unwrap();
    let passed = |name: &str| result(&json, name)["passed"].as_bool().unwrap();
    let reason = |name: &str| result(&json, name)["reason"].as_str().unwrap().to_string();
    for name in [
        "greets",
        "looks it up",
        "asks before delegating",
        "capsule keeps the order",
        "judged polite",
        "memory is not allowed",
        "reads the attachment",
    ] {
        assert!(passed(name), "{name}: {}", reason(name));
    }
    let greets = result(&json, "greets");
    assert_eq!(greets["input_tokens"], 120);
    assert_eq!(greets["output_tokens"], 8);
    assert!(
        (greets["cost"].as_f64().unwrap() - 0.000136).abs() < 1e-9,
        "{greets}"
    );
    let expected = [
        ("wrong words", "reply lacks \"Paris\"; reply contains \"good\"; reply does not match /^bonjour/"),
        ("wrong arguments", "tool session_search was called with {\"query\":\"receipt\"}, not matching /invoice/; tool delegate was not called"),
        ("tool where none should be", "tools were called: session_search"),
        ("asks nothing", "no approval was asked"),
        ("capsule lacks it", "capsule lacks \"ORD-9999\""),
        ("judged french", "judge said \"No, French.\" to \"Is the reply in Spanish?\""),
    ];
    for (name, why) in expected {
        assert!(!passed(name), "{name} passed");
        assert_eq!(reason(name), why, "{name}");
        assert!(table.contains(why), "{table}");
    }
    let caps = reason("over the caps");
    assert!(
        caps.starts_with("120 input tokens > 10; cost 0.000136 USD > 0.0000001 USD; "),
        "{caps}"
    );
    assert!(caps.ends_with(" ms > 0 ms"), "{caps}");
    let xml = std::fs::read_to_string(reports.join("eval.xml")).unwrap();
    assert!(
        xml.contains(r#"<testsuite name="herald eval" tests="14" failures="7""#),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 14, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 7, "{xml}");
    assert!(xml.contains(r#"<testcase name="greets""#), "{xml}");
    assert!(xml.contains("capsule lacks &quot;ORD-9999&quot;"), "{xml}");
    // A tool --allow-tools does not name was refused, and one that asks was denied: neither ran.
    let told = |words: &str| llm.tool_results_for(words).join(" | ");
    assert!(
        told("remember my notes")
            .starts_with("refused: the operator does not allow the tool \"memory\""),
        "{}",
        told("remember my notes")
    );
    assert!(
        told("delegate the report")
            .starts_with("denied: this chat's platform is not connected here"),
        "{}",
        told("delegate the report")
    );
    let ran = told("look up my invoice");
    assert!(
        !ran.is_empty() && !ran.starts_with("refused") && !ran.starts_with("denied"),
        "{ran}"
    );
    // The judge was asked on its own endpoint, twice, and the agent's model never.
    assert_eq!(judge.request_count(), 2);
    assert!(llm
        .requests()
        .iter()
        .all(|r| !r.last_user().contains("Question: ")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_cases_pass_and_repeat_and_compare_report_rates_and_deltas() {
    harness::init();
    let llm = FakeLlm::start().await;
    llm.answer_when_system("Answer in French.", "Bonjour.");
    let data = tempfile::tempdir().unwrap();
    let cfg = write_config(data.path(), "127.0.0.1:0", &llm.base_url(), "");
    let suite: String = (1..=100)
        .map(|i| {
            format!(
                "[[cases]]\nname = \"case {i}\"\n[[cases.messages]]\nperson = \"p{i}\"\n\
                 text = \"question {i}\"\n[cases.expect]\nreply_contains = \"question {i}\"\n\n"
            )
        })
        .collect();
    let hundred = data.path().join("hundred.toml");
    std::fs::write(&hundred, suite).unwrap();
    let started = Instant::now();
    let out = herald(&cfg, &["eval", hundred.to_str().unwrap()]);
    let wall = started.elapsed();
    let table = text(&out.stdout);
    assert!(out.status.success(), "{table}\n{}", text(&out.stderr));
    assert!(table.contains("100 cases: 100 passed, 0 failed"), "{table}");
    eprintln!("a 100-case suite against the instant fake model took {wall:.2?}");

    let small = data.path().join("small.yaml");
    std::fs::write(
        &small,
        "cases:\n  - name: greets\n    messages:\n      - person: ana\n        text: hello\n    \
         expect:\n      reply_contains: hello\n",
    )
    .unwrap();
    let french_dir = tempfile::tempdir().unwrap();
    let french = write_config(
        french_dir.path(),
        "127.0.0.1:0",
        &llm.base_url(),
        "[agent]\nsystem_message = \"Answer in French.\"\n",
    );
    let out = herald(
        &cfg,
        &[
            "eval",
            small.to_str().unwrap(),
            "--repeat",
            "3",
            "--compare",
            french.to_str().unwrap(),
        ],
    );
    let table = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}\n{}", text(&out.stderr));
    assert!(table.contains("greets  pass 3/3"), "{table}");
    let side = table
        .lines()
        .find(|l| l.starts_with("greets") && l.contains("FAIL 0/3"))
        .unwrap_or_else(|| panic!("no side-by-side line: {table}"));
    assert!(side.contains("120→120 (+0)"), "{side}");
    assert!(table.contains("herald.toml"), "{table}");
}
