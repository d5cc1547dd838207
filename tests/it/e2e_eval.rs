//! `herald eval`, `herald export` and `herald replay` as an operator runs them: the real binary
//! against the instant fake model served in this process, case files on disk, and what the
//! operator reads — the table, the exit status, the JSON and JUnit files, the exported case
//! file, the replay's turns and deltas.

use std::path::Path;
use std::process::Output;
use std::time::Instant;

use herald::app::App;
use herald::config::{self, LoadOptions};
use herald_test_support::fake_llm::{Billing, FakeLlm, Step};
use herald_test_support::harness::{self, Client};
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
        "delegate the report",
        Step::ToolCall("delegate".into(), r#"{"goal":"write the report"}"#.into()),
    );
    llm.push_when("Question: Is the reply polite?", Step::Reply("Yes.".into()));
    llm.push_when(
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
    let data = tempfile::tempdir().unwrap();
    let extra = format!("[tools]\nrequire_approval = [\"delegate\"]\n\n{PRICED}");
    let cfg = write_config(data.path(), "127.0.0.1:0", &llm.base_url(), &extra);
    let suite = data.path().join("suite.toml");
    std::fs::write(&suite, SUITE).unwrap();
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
        table.contains("12 cases: 5 passed, 7 failed"),
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
        xml.contains(r#"<testsuite name="herald eval" tests="12" failures="7""#),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 12, "{xml}");
    assert_eq!(xml.matches("<failure ").count(), 7, "{xml}");
    assert!(xml.contains(r#"<testcase name="greets""#), "{xml}");
    assert!(xml.contains("capsule lacks &quot;ORD-9999&quot;"), "{xml}");
}

/// Sessions of the live store as `herald sessions list` prints them.
fn sessions(config: &Path) -> String {
    let out = herald(config, &["sessions", "list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_conversation_passes_on_its_prompt_fails_on_a_changed_one_and_replays() {
    harness::init();
    let llm = FakeLlm::start().await;
    llm.set_billing(Billing::Fixed(120));
    llm.answer_when_system("The favourite colour is blue.", "Your colour is blue.");
    llm.answer_when_system("The favourite colour is red.", "Your colour is red.");
    let live = tempfile::tempdir().unwrap();
    let people = "[[people]]\nname = \"zoe\"\nids = [\"telegram:4242777\"]\n\n";
    let prompt = |colour: &str| {
        format!(
            "[agent]\nsystem_message = \"The favourite colour is {colour}.\"\n\n{people}{PRICED}"
        )
    };
    let blue = write_config(live.path(), "127.0.0.1:0", &llm.base_url(), &prompt("blue"));
    // A real conversation, recorded by the core in the live store.
    let options = LoadOptions {
        file: Some(blue.clone()),
        data_dir: None,
        listen: None,
        use_env: false,
    };
    let app = App::start(config::load(&options).unwrap()).await.unwrap();
    let client = Client::new(&app);
    for words in [
        "what is my colour? mail me at ana@example.com",
        "4242777 asked the same",
    ] {
        let body = serde_json::json!({"lane": "web:ana", "text": words, "sender": "ana"});
        let (status, reply) = client.chat_body(body).await;
        assert_eq!(
            (status, reply["reply"].as_str()),
            (200, Some("Your colour is blue."))
        );
    }
    harness::quiet(app.store.as_ref()).await;
    app.shutdown().await;

    let case = live.path().join("case.toml");
    let out = herald(
        &blue,
        &["export", "web:ana", "--out", case.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = std::fs::read_to_string(&case).unwrap();
    assert!(
        file.contains("reference = \"Your colour is blue.\""),
        "{file}"
    );
    assert!(
        file.contains("reply_contains = [\"Your colour is blue.\"]"),
        "{file}"
    );
    assert!(file.contains("person = \"ana\""), "{file}");
    assert!(
        !file.contains("ana@example.com") && !file.contains("4242777"),
        "{file}"
    );
    assert!(file.contains("someone asked the same"), "{file}");

    let before = sessions(&blue);
    let green = herald(&blue, &["eval", case.to_str().unwrap()]);
    let table = text(&green.stdout);
    assert!(green.status.success(), "{table}\n{}", text(&green.stderr));
    assert!(table.contains("1 cases: 1 passed, 0 failed"), "{table}");
    assert_eq!(sessions(&blue), before, "an eval wrote to the live store");

    let elsewhere = tempfile::tempdir().unwrap();
    let red = write_config(
        elsewhere.path(),
        "127.0.0.1:0",
        &llm.base_url(),
        &prompt("red"),
    );
    let failed = herald(&red, &["eval", case.to_str().unwrap()]);
    let table = text(&failed.stdout);
    assert_eq!(failed.status.code(), Some(1), "{table}");
    assert!(
        table.contains("reply lacks \"Your colour is blue.\""),
        "{table}"
    );
    assert!(text(&failed.stderr).contains("herald: 1 of 1 cases failed"));

    // The same conversation against a second model that bills more.
    let second_llm = FakeLlm::start().await;
    second_llm.set_billing(Billing::Fixed(500));
    let second_dir = tempfile::tempdir().unwrap();
    let second = write_config(
        second_dir.path(),
        "127.0.0.1:0",
        &second_llm.base_url(),
        PRICED,
    );
    let out = herald(
        &second,
        &[
            "replay",
            "web:ana",
            "--store-config",
            blue.to_str().unwrap(),
        ],
    );
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{shown}\n{}", text(&out.stderr));
    assert!(shown.contains("recorded: Your colour is blue."), "{shown}");
    assert!(
        shown.contains("new:      reply to: someone asked the same"),
        "{shown}"
    );
    assert_eq!(
        shown
            .matches("tokens in 120 → 500 (+380), cost 0.000136 USD → 0.000516 USD (+0.00038 USD)")
            .count(),
        2,
        "{shown}"
    );
    assert!(
        shown.contains("total: tokens in 240 → 1000 (+760)"),
        "{shown}"
    );
    assert_eq!(second_llm.request_count(), 2);
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
