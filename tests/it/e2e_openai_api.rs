//! The OpenAI-compatible API driven by the real `openai` Python SDK (installed into `.mcp-venv`
//! by `.ci/run` / `scripts/test`): the real core on the fake model, a key acting as a
//! `[[people]]` person, and what the SDK's user sees — answers, streams, a Responses chain,
//! errors as the SDK's exceptions, one turn for a retried request.

use std::path::Path;
use std::time::Duration;

use herald::app::App;
use herald::config::{ApiKeyConfig, Config, Person, Secret};
use herald_test_support::db::Db;
use herald_test_support::fake_llm::{FakeLlm, Step};
use herald_test_support::harness::{init, test_config};
use herald_test_support::on_each_backend;
use herald_test_support::skip::skip_or_fail;
use serde_json::Value;

mod gates;
mod images;

const KEY: &str = "sk-herald-laptop-0123456789";
const OTHER_KEY: &str = "sk-herald-phone-0123456789";

/// A Python with the `openai` SDK: the repo's `.mcp-venv`, else `python3`.
fn sdk_python() -> Option<String> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".mcp-venv/bin/python3");
    [venv.display().to_string(), "python3".to_string()]
        .into_iter()
        .find(|p| {
            std::process::Command::new(p)
                .args(["-c", "import openai"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// The daemon with the API on: keys `laptop` and `phone` acting as the person `ana`.
struct Api {
    llm: FakeLlm,
    data: tempfile::TempDir,
    app: App,
    python: String,
}

fn api_config(llm: &FakeLlm, data: &tempfile::TempDir) -> Config {
    let mut c = test_config(llm, data);
    c.cron.enabled = false;
    c.people = vec![Person {
        name: "ana".into(),
        ids: vec![],
    }];
    c.api.enabled = true;
    c.api.keys = [("laptop", KEY), ("phone", OTHER_KEY)]
        .into_iter()
        .map(|(name, key)| ApiKeyConfig {
            name: name.into(),
            key: Some(Secret::new(key)),
            key_env: None,
            person: "ana".into(),
        })
        .collect();
    c
}

impl Api {
    /// `None` (after saying why) when no Python with the SDK is here.
    async fn start(db: Db, tune: impl FnOnce(&mut Config)) -> Option<Api> {
        init();
        let Some(python) = sdk_python() else {
            skip_or_fail("no Python with the openai SDK (run scripts/test or .ci/run)");
            return None;
        };
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().unwrap();
        let mut c = api_config(&llm, &data);
        db.apply(&mut c);
        tune(&mut c);
        let app = App::start(c).await.expect("app starts");
        Some(Api {
            llm,
            data,
            app,
            python,
        })
    }

    /// Runs `body` after `client = OpenAI(...)` (the laptop key) and returns each line it
    /// printed as JSON.
    async fn run(&self, body: &str) -> Vec<Value> {
        let script = format!(
            "import json, openai\nfrom openai import OpenAI\n\
             client = OpenAI(max_retries=0, timeout=30)\n\
             def out(**kw):\n    print(json.dumps(kw), flush=True)\n{body}\n"
        );
        let run = tokio::process::Command::new(&self.python)
            .args(["-c", &script])
            .env("OPENAI_BASE_URL", format!("http://{}/v1", self.app.addr))
            .env("OPENAI_API_KEY", KEY)
            .env("OTHER_KEY", OTHER_KEY)
            .kill_on_drop(true)
            .output();
        let o = tokio::time::timeout(Duration::from_secs(90), run)
            .await
            .expect("the script ends")
            .expect("python runs");
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "script failed: {stdout}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }
}

/// `models.list`, a plain and a streamed chat completion (with the usage chunk), a wrong key
/// and an unknown model as the SDK's exceptions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_lists_models_chats_and_streams() {
    let Some(api) = Api::start(Db::Sqlite, |c| c.streaming.enabled = Some(true)).await else {
        return;
    };
    api.llm.push(Step::Reply("Hello from Herald.".into()));
    api.llm.push(Step::stream(
        "A streamed answer, piece by piece.",
        5,
        Duration::from_millis(30),
    ));
    let lines = api
        .run(
            r#"
out(models=[m.id for m in client.models.list()])
r = client.chat.completions.create(model="herald", messages=[{"role": "user", "content": "hi"}])
out(text=r.choices[0].message.content, finish=r.choices[0].finish_reason, id=r.id,
    usage=r.usage.model_dump())
deltas, usage = [], None
for chunk in client.chat.completions.create(model="herald", stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello from Herald."},
                  {"role": "user", "content": "stream please"}]):
    if chunk.usage is not None:
        usage = chunk.usage.model_dump()
    for c in chunk.choices:
        if c.delta.content:
            deltas.append(c.delta.content)
out(deltas=deltas, usage=usage)
try:
    OpenAI(api_key="sk-wrong-key-0123456789", max_retries=0).models.list()
except openai.AuthenticationError as e:
    out(auth=e.status_code, code=e.code)
try:
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
except openai.NotFoundError as e:
    out(missing=e.status_code, code=e.code)
"#,
        )
        .await;
    assert_eq!(lines[0]["models"], serde_json::json!(["herald"]));
    assert_eq!(lines[1]["text"], "Hello from Herald.");
    assert_eq!(lines[1]["finish"], "stop");
    // The turn's real usage: what the fake model billed for its one call.
    let usage = &lines[1]["usage"];
    assert_eq!(usage["prompt_tokens"], 120, "{usage}");
    assert_eq!(usage["completion_tokens"], 8, "{usage}");
    assert_eq!(usage["total_tokens"], 128, "{usage}");
    assert_eq!(
        usage["prompt_tokens_details"]["cached_tokens"], 100,
        "{usage}"
    );
    let deltas: Vec<String> = serde_json::from_value(lines[2]["deltas"].clone()).unwrap();
    assert_eq!(deltas.concat(), "A streamed answer, piece by piece.");
    assert!(deltas.len() > 2, "the answer came in pieces: {deltas:?}");
    assert_eq!(
        lines[2]["usage"]["total_tokens"], 128,
        "the usage chunk: {}",
        lines[2]
    );
    assert_eq!(lines[3]["auth"], 401);
    assert_eq!(lines[3]["code"], "invalid_api_key");
    assert_eq!(lines[4]["missing"], 404);
    assert_eq!(api.llm.request_count(), 2, "no turn for a refused request");
    // The streamed request's new input was the last user message alone.
    assert!(api.llm.last_request().last_user().contains("stream please"));
    api.app.shutdown().await;
}

/// The same conversation continued across calls (the model's second request holds the first
/// exchange, not twice), and a retried request — one `Idempotency-Key`, or the SDK sending the
/// same body again — answered once by one turn.
async fn conversation_and_retries(db: Db) {
    let Some(api) = Api::start(db, |_| {}).await else {
        return;
    };
    api.llm.push(Step::Reply("Nice to meet you, Ana.".into()));
    api.llm.push(Step::Reply("Your name is Ana.".into()));
    api.llm.push(Step::Reply("Once.".into()));
    api.llm.push(Step::Reply("Twice.".into()));
    let lines = api
        .run(
            r#"
h = {"X-Herald-Conversation": "intro"}
first = [{"role": "user", "content": "My name is Ana."}]
a = client.chat.completions.create(model="herald", messages=first, extra_headers=h)
out(text=a.choices[0].message.content)
second = first + [{"role": "assistant", "content": a.choices[0].message.content},
                  {"role": "user", "content": "What is my name?"}]
b = client.chat.completions.create(model="herald", messages=second, extra_headers=h)
out(text=b.choices[0].message.content)
once = {"X-Herald-Conversation": "retry", "Idempotency-Key": "req-1"}
msgs = [{"role": "user", "content": "do it once"}]
r1 = client.chat.completions.create(model="herald", messages=msgs, extra_headers=once)
r2 = client.chat.completions.create(model="herald", messages=msgs, extra_headers=once)
out(texts=[r1.choices[0].message.content, r2.choices[0].message.content], ids=[r1.id, r2.id])
again = [{"role": "user", "content": "the SDK retries this"}]
s1 = client.chat.completions.create(model="herald", messages=again, user="sdk")
s2 = client.chat.completions.create(model="herald", messages=again, user="sdk",
        extra_headers={"x-stainless-retry-count": "1"})
out(texts=[s1.choices[0].message.content, s2.choices[0].message.content])
"#,
        )
        .await;
    assert_eq!(lines[0]["text"], "Nice to meet you, Ana.");
    assert_eq!(lines[1]["text"], "Your name is Ana.");
    let second = &api.llm.requests()[1];
    let said = |needle: &str| {
        second
            .messages()
            .iter()
            .filter(|m| herald_test_support::fake_llm::text_of(m).contains(needle))
            .count()
    };
    assert_eq!(said("My name is Ana."), 1, "{:?}", second.messages());
    assert_eq!(said("Nice to meet you, Ana."), 1);
    assert!(second.last_user().contains("What is my name?"));
    assert_eq!(lines[2]["texts"], serde_json::json!(["Once.", "Once."]));
    assert_eq!(lines[2]["ids"][0], lines[2]["ids"][1]);
    assert_eq!(lines[3]["texts"], serde_json::json!(["Twice.", "Twice."]));
    assert_eq!(api.llm.request_count(), 4, "one turn per distinct request");
    let lanes: Vec<String> = api
        .app
        .store
        .lanes_overview(10)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.lane.as_str().to_string())
        .collect();
    for lane in ["api:laptop:intro", "api:laptop:retry", "api:laptop:sdk"] {
        assert!(lanes.iter().any(|l| l == lane), "{lane} in {lanes:?}");
    }
    api.app.shutdown().await;
}

on_each_backend!(
    a_conversation_continues_and_a_retry_runs_once_sqlite,
    a_conversation_continues_and_a_retry_runs_once_postgres,
    conversation_and_retries
);

/// A Responses chain: `previous_response_id` continues the first response's conversation; a
/// streamed response's events; another key cannot continue this key's response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_chain_continues_its_conversation() {
    let Some(api) = Api::start(Db::Sqlite, |c| c.streaming.enabled = Some(true)).await else {
        return;
    };
    api.llm.push(Step::Reply("Noted: 42.".into()));
    api.llm.push(Step::stream(
        "The number was 42.",
        4,
        Duration::from_millis(20),
    ));
    let lines = api
        .run(
            r#"
import os
a = client.responses.create(model="herald", input="Remember the number 42.")
out(id=a.id, text=a.output_text, status=a.status)
kinds, deltas, final = [], [], None
for ev in client.responses.create(model="herald", input="Which number?", previous_response_id=a.id, stream=True):
    kinds.append(ev.type)
    if ev.type == "response.output_text.delta":
        deltas.append(ev.delta)
    if ev.type == "response.completed":
        final = ev.response.output_text
out(kinds=kinds, text="".join(deltas), final=final)
try:
    OpenAI(api_key=os.environ["OTHER_KEY"], max_retries=0).responses.create(
        model="herald", input="peek", previous_response_id=a.id)
except openai.NotFoundError as e:
    out(other=e.status_code)
"#,
        )
        .await;
    assert_eq!(lines[0]["text"], "Noted: 42.");
    assert_eq!(lines[0]["status"], "completed");
    assert_eq!(lines[1]["text"], "The number was 42.");
    assert_eq!(lines[1]["final"], "The number was 42.");
    let kinds: Vec<String> = serde_json::from_value(lines[1]["kinds"].clone()).unwrap();
    assert_eq!(kinds.first().map(String::as_str), Some("response.created"));
    assert_eq!(kinds.last().map(String::as_str), Some("response.completed"));
    assert_eq!(lines[2]["other"], 404);
    let second = api.llm.last_request();
    assert!(
        second
            .messages()
            .iter()
            .any(|m| herald_test_support::fake_llm::text_of(m).contains("Remember the number 42.")),
        "the chained request holds the first exchange"
    );
    assert_eq!(api.llm.request_count(), 2);
    api.app.shutdown().await;
}

/// A tool call inside the turn is invisible to the client except as the final text; the
/// memory it wrote is the key's person's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_inside_the_turn_shows_only_as_the_answer() {
    let Some(api) = Api::start(Db::Sqlite, |_| {}).await else {
        return;
    };
    api.llm.push(Step::ToolCall(
        "memory".into(),
        r#"{"action":"add","target":"user","content":"Ana likes green tea."}"#.into(),
    ));
    api.llm.push(Step::Reply("I will remember that.".into()));
    let lines = api
        .run(
            r#"
r = client.chat.completions.create(model="herald",
        messages=[{"role": "user", "content": "I like green tea."}])
m = r.choices[0].message
out(text=m.content, tool_calls=m.tool_calls, finish=r.choices[0].finish_reason,
    total=r.usage.total_tokens)
"#,
        )
        .await;
    assert_eq!(lines[0]["text"], "I will remember that.");
    assert!(lines[0]["tool_calls"].is_null());
    assert_eq!(lines[0]["finish"], "stop");
    assert_eq!(
        lines[0]["total"], 256,
        "both model calls of the turn are counted"
    );
    assert_eq!(api.llm.request_count(), 2, "the tool ran inside the turn");
    let user = std::fs::read_to_string(api.data.path().join("memory/ana/USER.md")).unwrap();
    assert!(user.contains("Ana likes green tea."), "{user}");
    api.app.shutdown().await;
}

/// Off by default: no route, and a request a client sends wrong gets OpenAI's 400 shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_and_the_switch() {
    init();
    let llm = FakeLlm::start().await;
    let data = tempfile::tempdir().unwrap();
    let app = App::start(api_config(&llm, &data)).await.unwrap();
    let http = reqwest::Client::new();
    let post = |body: Value| {
        http.post(format!("http://{}/v1/chat/completions", app.addr))
            .bearer_auth(KEY)
            .json(&body)
            .send()
    };
    let cases = [
        serde_json::json!({"model": "herald"}),
        serde_json::json!({"model": "herald", "messages": [{"role": "assistant", "content": "a"}]}),
        serde_json::json!({"model": "herald", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]}),
    ];
    for body in cases {
        let r = post(body.clone()).await.unwrap();
        assert_eq!(r.status().as_u16(), 400, "{body}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    assert_eq!(llm.request_count(), 0);
    app.shutdown().await;

    let data = tempfile::tempdir().unwrap();
    let mut off = api_config(&llm, &data);
    off.api.enabled = false;
    let app = App::start(off).await.unwrap();
    let r = http
        .get(format!("http://{}/v1/models", app.addr))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    app.shutdown().await;
}
