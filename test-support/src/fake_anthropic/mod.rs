//! A fake Anthropic Messages API on 127.0.0.1 for end-to-end tests and the cache-plan bench.
//!
//! `POST /v1/messages` checks what the real API checks (the `x-api-key` and
//! `anthropic-version` headers, `max_tokens`, block shapes, alternating roles, tool results
//! right after their calls, at most four breakpoints: 400 otherwise), bills like Anthropic
//! with prompt caching simulated by breakpoint prefixes (`check.rs`), and answers from a
//! script: text, tool calls (several at once), thinking then text, or any error status. When
//! the script is empty it answers `reply to: <last user text>`. A request with `stream: true`
//! gets the same answer as server-sent events.

mod check;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use serde_json::{json, Value};

pub use check::{Bill, MAX_BREAKPOINTS};

/// The key the fake accepts.
pub const KEY: &str = "sk-ant-fake-key-0123456789";

#[derive(Clone, Debug)]
pub enum Step {
    Reply(String),
    /// Tool calls in one answer (name, JSON input), after an optional text.
    Tools(Option<String>, Vec<(String, String)>),
    /// Thinking (shown only as reasoning), then the answer text.
    ThinkThenReply(String, String),
    /// Any status with headers and a raw body.
    Status(u16, Vec<(String, String)>, String),
}

impl Step {
    pub fn tool(name: &str, input: &str) -> Step {
        Step::Tools(None, vec![(name.into(), input.into())])
    }

    fn error(status: u16, kind: &str, message: &str) -> Step {
        let body = json!({"type": "error", "error": {"type": kind, "message": message}});
        Step::Status(status, Vec::new(), body.to_string())
    }

    pub fn rate_limited(retry_after_secs: u32) -> Step {
        let Step::Status(s, _, b) = Step::error(
            429,
            "rate_limit_error",
            "Number of requests has exceeded your rate limit",
        ) else {
            unreachable!()
        };
        Step::Status(
            s,
            vec![("retry-after".into(), retry_after_secs.to_string())],
            b,
        )
    }

    pub fn overloaded() -> Step {
        Step::error(529, "overloaded_error", "Overloaded")
    }

    pub fn unauthorized() -> Step {
        Step::error(401, "authentication_error", "invalid x-api-key")
    }

    pub fn too_long() -> Step {
        Step::error(
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
        )
    }
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub body: Value,
    pub api_key: Option<String>,
    pub version: Option<String>,
    /// What the fake billed (zero for a refused request).
    pub bill: Bill,
    /// The 400 message when the fake refused the request's shape.
    pub refused: Option<String>,
}

impl Recorded {
    /// The system blocks exactly as sent (`cache_control` included).
    pub fn system_json(&self) -> String {
        self.body["system"].to_string()
    }

    pub fn breakpoints(&self) -> usize {
        self.body.to_string().matches("\"cache_control\"").count()
    }
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Step>,
    requests: Vec<Recorded>,
    cache: check::Cache,
    counter: u64,
}

#[derive(Clone)]
pub struct FakeAnthropic {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl FakeAnthropic {
    pub async fn start() -> FakeAnthropic {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/models", get(models))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Streamed answers are many small writes: see `FakeLlm::start` on TCP_NODELAY.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeAnthropic {
            addr,
            inner,
            task: Arc::new(task),
        }
    }

    /// The API root, as `ANTHROPIC_BASE_URL` is written (no `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn push(&self, step: Step) {
        self.inner.lock().unwrap().script.push_back(step);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// The sum of every bill so far.
    pub fn billed(&self) -> Bill {
        let g = self.inner.lock().unwrap();
        g.requests.iter().fold(Bill::default(), |mut t, r| {
            t.input += r.bill.input;
            t.cache_read += r.bill.cache_read;
            t.cache_write += r.bill.cache_write;
            t
        })
    }
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

async fn models(headers: HeaderMap) -> Response {
    if header(&headers, "x-api-key").as_deref() != Some(KEY) {
        return error_response(Step::unauthorized());
    }
    Json(json!({"data": [{"type": "model", "id": "claude-fake", "display_name": "Fake"}]}))
        .into_response()
}

fn header(h: &HeaderMap, name: &str) -> Option<String> {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn error_response(step: Step) -> Response {
    let Step::Status(status, headers, body) = step else {
        unreachable!("only status steps are errors")
    };
    let mut resp = (
        StatusCode::from_u16(status).unwrap(),
        [("content-type", "application/json")],
        body,
    )
        .into_response();
    for (k, v) in headers {
        resp.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    resp
}

async fn messages(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut g = inner.lock().unwrap();
    let api_key = header(&headers, "x-api-key");
    let version = header(&headers, "anthropic-version");
    let mut rec = Recorded {
        body: body.clone(),
        api_key: api_key.clone(),
        version: version.clone(),
        bill: Bill::default(),
        refused: None,
    };
    if api_key.as_deref() != Some(KEY) {
        g.requests.push(rec);
        return error_response(Step::unauthorized());
    }
    if version.as_deref() != Some("2023-06-01") {
        rec.refused = Some("anthropic-version: header is required".into());
        g.requests.push(rec);
        return error_response(Step::error(
            400,
            "invalid_request_error",
            "anthropic-version: header is required",
        ));
    }
    if let Err(message) = check::shape(&body) {
        rec.refused = Some(message.clone());
        g.requests.push(rec);
        return error_response(Step::error(400, "invalid_request_error", &message));
    }
    let step = g.script.pop_front();
    if let Some(s @ Step::Status(..)) = step {
        g.requests.push(rec);
        return error_response(s);
    }
    rec.bill = g.cache.bill(&body);
    let bill = rec.bill;
    g.requests.push(rec);
    g.counter += 1;
    let id = format!("msg_{}", g.counter);
    drop(g);
    let step = step.unwrap_or_else(|| Step::Reply(format!("reply to: {}", last_user_text(&body))));
    let blocks = answer_blocks(&id, step);
    let usage = json!({
        "input_tokens": bill.input,
        "cache_read_input_tokens": bill.cache_read,
        "cache_creation_input_tokens": bill.cache_write,
        "output_tokens": 8,
    });
    let stop = if blocks.iter().any(|b| b["type"] == "tool_use") {
        "tool_use"
    } else {
        "end_turn"
    };
    let model = body["model"].clone();
    if body["stream"].as_bool().unwrap_or(false) {
        return sse(&id, &model, &blocks, stop, &usage);
    }
    Json(json!({
        "id": id, "type": "message", "role": "assistant", "model": model,
        "content": blocks, "stop_reason": stop, "usage": usage,
    }))
    .into_response()
}

fn last_user_text(body: &Value) -> String {
    let Some(m) = body["messages"].as_array().and_then(|m| m.last()) else {
        return String::new();
    };
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .rev()
            .find(|b| b["type"] == "text")
            .and_then(|b| b["text"].as_str())
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

fn answer_blocks(id: &str, step: Step) -> Vec<Value> {
    match step {
        Step::Reply(t) => vec![json!({"type": "text", "text": t})],
        Step::ThinkThenReply(th, t) => vec![
            json!({"type": "thinking", "thinking": th, "signature": "sig"}),
            json!({"type": "text", "text": t}),
        ],
        Step::Tools(text, calls) => {
            let mut out: Vec<Value> = text
                .map(|t| json!({"type": "text", "text": t}))
                .into_iter()
                .collect();
            for (i, (name, input)) in calls.into_iter().enumerate() {
                let input: Value =
                    serde_json::from_str(&input).expect("scripted tool input is JSON");
                out.push(json!({"type": "tool_use", "id": format!("toolu_{id}_{i}"), "name": name, "input": input}));
            }
            out
        }
        Step::Status(..) => unreachable!(),
    }
}

/// The answer as the events the real API streams (text in two pieces, tool input in two).
fn sse(id: &str, model: &Value, blocks: &[Value], stop: &str, usage: &Value) -> Response {
    let mut out = String::new();
    let mut ev =
        |name: &str, data: Value| out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(1);
    ev(
        "message_start",
        json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": null, "usage": start_usage}}),
    );
    ev("ping", json!({"type": "ping"}));
    for (i, b) in blocks.iter().enumerate() {
        let (start, deltas) = match b["type"].as_str().unwrap() {
            "text" => {
                let t = b["text"].as_str().unwrap();
                let cut = t
                    .char_indices()
                    .nth(t.chars().count() / 2)
                    .map_or(0, |(i, _)| i);
                let d = [&t[..cut], &t[cut..]].map(|p| json!({"type": "text_delta", "text": p}));
                (json!({"type": "text", "text": ""}), d.to_vec())
            }
            "thinking" => (
                json!({"type": "thinking", "thinking": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": b["thinking"]}),
                    json!({"type": "signature_delta", "signature": "sig"}),
                ],
            ),
            _ => {
                let input = b["input"].to_string();
                let cut = input.len() / 2;
                let d = [&input[..cut], &input[cut..]]
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}));
                (
                    json!({"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}),
                    d.to_vec(),
                )
            }
        };
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": i, "content_block": start}),
        );
        for d in deltas {
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta": d}),
            );
        }
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop},
        "usage": {"output_tokens": usage["output_tokens"]}}),
    );
    ev("message_stop", json!({"type": "message_stop"}));
    ([("content-type", "text/event-stream")], out).into_response()
}
