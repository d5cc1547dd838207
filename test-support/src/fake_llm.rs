//! A fake OpenAI-compatible model server on 127.0.0.1 for end-to-end tests.
//!
//! It speaks the real `/v1/chat/completions` wire format and records every request body. Its
//! answers come from a script (a queue of steps); when the script is empty it answers
//! `reply to: <last user text>`. Steps can delay, fail with any status and headers, answer
//! garbage, ask for a tool call, or hang past the client's timeout.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use serde_json::{json, Value};

#[derive(Clone, Debug)]
pub enum Step {
    Reply(String),
    /// Answer with a tool call (name, JSON arguments).
    ToolCall(String, String),
    /// Answer with several tool calls at once, in this order (ids `call_1`, `call_2`, …).
    ToolCalls(Vec<(String, String)>),
    /// Any status with headers and a raw body (429 with Retry-After, 500, 401…).
    Status(u16, Vec<(String, String)>, String),
    /// 200 with a body that is not a chat completion.
    Garbage(String),
    /// Wait, then do the inner step.
    Delay(Duration, Box<Step>),
    /// Never answer (until the client gives up).
    Hang,
    /// A streamed answer (`stream: true`): these text pieces as server-sent events, `delay`
    /// before each; with `cut_after: Some(n)`, the connection ends after `n` pieces with no
    /// `finish_reason` and no `[DONE]`. To a request without `stream` it answers the whole text
    /// after the time streaming it would take.
    Stream {
        pieces: Vec<String>,
        delay: Duration,
        cut_after: Option<usize>,
    },
    /// Streamed reasoning (`reasoning_content` deltas), then streamed answer text, `delay`
    /// before each piece; to a request without `stream`, the answer alone.
    ThinkThenStream {
        thoughts: Vec<String>,
        pieces: Vec<String>,
        delay: Duration,
    },
    /// Streamed text (`delay` before each piece) that ends in a tool call (name, JSON
    /// arguments): what a model writing "let me look that up" before calling a tool sends.
    StreamThenTool {
        pieces: Vec<String>,
        delay: Duration,
        name: String,
        args: String,
    },
}

impl Step {
    /// `text` streamed in pieces of about `piece_chars` characters, `delay` before each.
    pub fn stream(text: &str, piece_chars: usize, delay: Duration) -> Step {
        let chars: Vec<char> = text.chars().collect();
        let pieces = chars
            .chunks(piece_chars.max(1))
            .map(|c| c.iter().collect())
            .collect();
        Step::Stream {
            pieces,
            delay,
            cut_after: None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub body: Value,
    pub started: Instant,
    pub finished: Option<Instant>,
}

impl Recorded {
    pub fn messages(&self) -> &Vec<Value> {
        self.body["messages"].as_array().expect("messages array")
    }

    pub fn system(&self) -> String {
        self.messages()[0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The newest tool result in this request: what the model was told a tool answered.
    pub fn last_tool_result(&self) -> String {
        self.messages()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_else(|| panic!("the request carries no tool result: {:?}", self.messages()))
            .to_string()
    }

    /// The names of the tools offered in this request, in order.
    pub fn tools(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|t| {
                        t["function"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string()
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The offered tools of one MCP server (their names start with `<server>__`).
    pub fn server_tools(&self, server: &str) -> Vec<String> {
        let prefix = format!("{server}__");
        self.tools()
            .into_iter()
            .filter(|n| n.starts_with(&prefix))
            .collect()
    }

    /// The text of the newest user message (its text parts joined, when it has parts).
    pub fn last_user(&self) -> String {
        self.messages()
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(text_of)
            .unwrap_or_default()
    }

    /// The image data URLs of every message in this request, in order, with the index of the
    /// message that carries each.
    pub fn images(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        for (i, m) in self.messages().iter().enumerate() {
            for part in m["content"].as_array().into_iter().flatten() {
                if let Some(url) = part["image_url"]["url"].as_str() {
                    out.push((i, url.to_string()));
                }
            }
        }
        out
    }
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Step>,
    /// Steps reserved for requests whose newest user message contains the needle, taken in
    /// order before the script (tests with turns in several lanes at once, e.g. cron fires).
    keyed: Vec<(String, Step)>,
    /// Standing answers for requests whose system message contains the needle (never used
    /// up): a model that answers by what its prompt says, for evals of a prompt change.
    by_system: Vec<(String, String)>,
    /// Applied to default replies when the script is empty.
    default_delay: Duration,
    /// Default replies come in this many pieces spread over `default_delay` (0 or 1: whole,
    /// after the delay); a request that does not stream gets the whole text at the same time.
    default_pieces: usize,
    /// Repeats forever once the script is empty (e.g. always hang).
    sticky: Option<Step>,
    /// Extra random delay, uniform in `0..=jitter`, on top of `default_delay`.
    jitter: Duration,
    /// With probability `fault_rate`, an unscripted request gets one of `faults` (picked at
    /// random) instead of the default reply: intermittent failures for the fault tests.
    fault_rate: f64,
    faults: Vec<Step>,
    requests: Vec<Recorded>,
    billing: Billing,
}

/// What the fake bills as `prompt_tokens`.
#[derive(Clone, Copy, Debug, Default)]
pub enum Billing {
    /// 120 tokens, 100 of them cached.
    #[default]
    Fixed120,
    /// A fixed count, none cached.
    Fixed(u64),
    /// The request's message characters divided by 4, like a real tokenizer on English.
    BySize,
}

#[derive(Clone)]
pub struct FakeLlm {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl FakeLlm {
    pub async fn start() -> FakeLlm {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .route("/v1/models", get(models))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // A streamed answer is many small writes: without TCP_NODELAY, Nagle's algorithm holds
        // each after the first until the client's delayed ACK (~40 ms on Linux), a stall no real
        // provider adds.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeLlm {
            addr,
            inner,
            task: Arc::new(task),
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push(&self, step: Step) {
        self.inner.lock().unwrap().script.push_back(step);
    }

    /// Queues `step` for the next request whose newest user message contains `needle`; such
    /// requests take their keyed steps, in order, before the shared script.
    pub fn push_when(&self, needle: &str, step: Step) {
        self.inner
            .lock()
            .unwrap()
            .keyed
            .push((needle.to_string(), step));
    }

    /// Every request whose system message contains `needle` is answered `text` (after any
    /// keyed step of its own), until the end of the fake.
    pub fn answer_when_system(&self, needle: &str, text: &str) {
        self.inner
            .lock()
            .unwrap()
            .by_system
            .push((needle.to_string(), text.to_string()));
    }

    pub fn set_default_delay(&self, d: Duration) {
        self.inner.lock().unwrap().default_delay = d;
    }

    /// Default replies are written in `n` pieces over the default delay: a model that streams.
    pub fn set_default_pieces(&self, n: usize) {
        self.inner.lock().unwrap().default_pieces = n;
    }

    /// Default replies wait a random time in `0..=max` (plus the default delay).
    pub fn set_jitter(&self, max: Duration) {
        self.inner.lock().unwrap().jitter = max;
    }

    /// Unscripted requests fail with one of `faults` with probability `rate`.
    pub fn set_random_faults(&self, rate: f64, faults: Vec<Step>) {
        let mut g = self.inner.lock().unwrap();
        g.fault_rate = rate;
        g.faults = faults;
    }

    pub fn set_sticky(&self, step: Option<Step>) {
        self.inner.lock().unwrap().sticky = step;
    }

    pub fn set_billing(&self, b: Billing) {
        self.inner.lock().unwrap().billing = b;
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().requests.clone()
    }

    /// What the model was told each tool call returned in the turn answering the user message
    /// that contains `needle`, in order (from the request of that turn that carried most).
    pub fn tool_results_for(&self, needle: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.requests() {
            if !r.last_user().contains(needle) {
                continue;
            }
            let msgs = r.messages();
            let turn = msgs.iter().rposition(|m| m["role"] == "user").unwrap_or(0);
            let results: Vec<String> = msgs[turn..]
                .iter()
                .filter(|m| m["role"] == "tool")
                .filter_map(|m| m["content"].as_str().map(str::to_string))
                .collect();
            if results.len() > out.len() {
                out = results;
            }
        }
        out
    }

    /// The newest request (panics when there is none).
    pub fn last_request(&self) -> Recorded {
        self.requests().pop().expect("a model request")
    }

    pub fn request_count(&self) -> usize {
        self.inner.lock().unwrap().requests.len()
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        if Arc::strong_count(&self.task) == 1 {
            self.task.abort();
        }
    }
}

async fn models() -> Json<Value> {
    Json(
        json!({"object": "list", "data": [{"id": "fake-model", "object": "model", "context_length": 32768}]}),
    )
}

async fn completions(State(inner): State<Arc<Mutex<Inner>>>, Json(body): Json<Value>) -> Response {
    let (idx, step, default_delay, fault, pieces) = {
        let mut g = inner.lock().unwrap();
        g.requests.push(Recorded {
            body: body.clone(),
            started: Instant::now(),
            finished: None,
        });
        let idx = g.requests.len() - 1;
        let last_user = body["messages"]
            .as_array()
            .and_then(|ms| ms.iter().rev().find(|m| m["role"] == "user"))
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        let keyed = g
            .keyed
            .iter()
            .position(|(needle, _)| last_user.contains(needle.as_str()))
            .map(|i| g.keyed.remove(i).1);
        let system = body["messages"]
            .as_array()
            .and_then(|ms| ms.iter().find(|m| m["role"] == "system"))
            .map(text_of)
            .unwrap_or_default();
        let by_system = g
            .by_system
            .iter()
            .find(|(needle, _)| system.contains(needle.as_str()))
            .map(|(_, text)| Step::Reply(text.clone()));
        let step = keyed
            .or(by_system)
            .or_else(|| g.script.pop_front())
            .or_else(|| g.sticky.clone());
        let mut delay = g.default_delay;
        let mut fault = None;
        if step.is_none() {
            use rand::Rng;
            let mut rng = rand::rng();
            if !g.jitter.is_zero() {
                delay += g.jitter.mul_f64(rng.random::<f64>());
            }
            if !g.faults.is_empty() && rng.random::<f64>() < g.fault_rate {
                fault = Some(g.faults[rng.random_range(0..g.faults.len())].clone());
            }
        }
        (idx, step, delay, fault, g.default_pieces)
    };
    let billing = inner.lock().unwrap().billing;
    let usage = match billing {
        Billing::Fixed120 => {
            json!({"prompt_tokens": 120, "completion_tokens": 8, "total_tokens": 128,
                  "prompt_tokens_details": {"cached_tokens": 100}})
        }
        Billing::Fixed(n) => {
            json!({"prompt_tokens": n, "completion_tokens": 8, "total_tokens": n + 8})
        }
        Billing::BySize => {
            let chars: usize = body["messages"]
                .as_array()
                .map(|ms| ms.iter().map(|m| m.to_string().len()).sum())
                .unwrap_or(0);
            let n = (chars / 4) as u64;
            json!({"prompt_tokens": n, "completion_tokens": 8, "total_tokens": n + 8})
        }
    };
    let step = match step.or(fault) {
        Some(s) => s,
        None => {
            let last = body["messages"]
                .as_array()
                .and_then(|ms| ms.iter().rev().find(|m| m["role"] == "user"))
                .map(text_of)
                .unwrap_or_default();
            let text = format!("reply to: {last}");
            match pieces {
                0 | 1 => Step::Delay(default_delay, Box::new(Step::Reply(text))),
                n => {
                    let chars = text.chars().count().div_ceil(n);
                    let pieces = text.chars().count().div_ceil(chars) as u32;
                    Step::stream(&text, chars, default_delay / pieces)
                }
            }
        }
    };
    let streamed = body["stream"].as_bool().unwrap_or(false);
    let resp = run(step, usage, streamed).await;
    inner.lock().unwrap().requests[idx].finished = Some(Instant::now());
    resp
}

fn completion(message: Value, usage: &Value) -> Response {
    Json(json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage
    }))
    .into_response()
}

/// One `data:` event of a streamed answer.
fn sse(data: &Value) -> String {
    format!("data: {data}\n\n")
}

fn stream_chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake-model",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

/// A streamed answer: `pieces` (each a delta) with `delay` before each, then the finish, the
/// usage chunk and `[DONE]`, unless cut after `cut_after` pieces.
fn streamed(
    pieces: Vec<Value>,
    delay: Duration,
    cut_after: Option<usize>,
    finish: &'static str,
    usage: Value,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<String, std::io::Error>>(16);
    tokio::spawn(async move {
        let _ = tx
            .send(Ok(sse(&stream_chunk(
                json!({"role": "assistant", "content": ""}),
                None,
            ))))
            .await;
        for (i, piece) in pieces.into_iter().enumerate() {
            if cut_after.is_some_and(|n| i >= n) {
                // The connection ends mid-answer: no finish_reason, no [DONE].
                return;
            }
            tokio::time::sleep(delay).await;
            if tx.send(Ok(sse(&stream_chunk(piece, None)))).await.is_err() {
                return;
            }
        }
        let _ = tx
            .send(Ok(sse(&stream_chunk(json!({}), Some(finish)))))
            .await;
        let _ = tx
            .send(Ok(sse(
                &json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                                  "model": "fake-model", "choices": [], "usage": usage}),
            )))
            .await;
        let _ = tx.send(Ok("data: [DONE]\n\n".to_string())).await;
    });
    let body = axum::body::Body::from_stream(tokio_stream_from(rx));
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
        body,
    )
        .into_response()
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<String, std::io::Error>>,
) -> impl futures::Stream<Item = Result<String, std::io::Error>> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn run(
    step: Step,
    usage: Value,
    stream: bool,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>> {
    Box::pin(async move {
        match step {
            Step::Reply(text) if stream => streamed(
                vec![json!({"content": text})],
                Duration::ZERO,
                None,
                "stop",
                usage,
            ),
            Step::ToolCall(name, args) if stream => streamed(
                vec![
                    json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                            "function": {"name": name, "arguments": args}}]}),
                ],
                Duration::ZERO,
                None,
                "tool_calls",
                usage,
            ),
            Step::Stream {
                pieces,
                delay,
                cut_after,
            } if stream => streamed(
                pieces.into_iter().map(|p| json!({"content": p})).collect(),
                delay,
                cut_after,
                "stop",
                usage,
            ),
            Step::StreamThenTool {
                pieces,
                delay,
                name,
                args,
            } if stream => {
                let mut deltas: Vec<Value> =
                    pieces.into_iter().map(|p| json!({"content": p})).collect();
                deltas.push(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                                   "function": {"name": name, "arguments": args}}]}));
                streamed(deltas, delay, None, "tool_calls", usage)
            }
            Step::StreamThenTool {
                pieces,
                delay,
                name,
                args,
            } => {
                tokio::time::sleep(delay * pieces.len() as u32).await;
                completion(
                    json!({
                        "role": "assistant", "content": pieces.concat(),
                        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}]
                    }),
                    &usage,
                )
            }
            Step::ThinkThenStream {
                thoughts,
                pieces,
                delay,
            } if stream => {
                let mut deltas: Vec<Value> = thoughts
                    .into_iter()
                    .map(|t| json!({"reasoning_content": t}))
                    .collect();
                deltas.extend(pieces.into_iter().map(|p| json!({"content": p})));
                streamed(deltas, delay, None, "stop", usage)
            }
            Step::ThinkThenStream { pieces, .. } => completion(
                json!({"role": "assistant", "content": pieces.concat()}),
                &usage,
            ),
            // Not streamed: the whole text once the model would have finished writing it.
            Step::Stream { pieces, delay, .. } => {
                tokio::time::sleep(delay * pieces.len() as u32).await;
                completion(
                    json!({"role": "assistant", "content": pieces.concat()}),
                    &usage,
                )
            }
            Step::Reply(text) => completion(json!({"role": "assistant", "content": text}), &usage),
            Step::ToolCalls(calls) => {
                let calls: Vec<Value> = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, args))| {
                        json!({"id": format!("call_{}", i + 1), "type": "function",
                               "function": {"name": name, "arguments": args}})
                    })
                    .collect();
                if stream {
                    let deltas = calls
                        .into_iter()
                        .enumerate()
                        .map(|(i, mut c)| {
                            c["index"] = json!(i);
                            json!({"tool_calls": [c]})
                        })
                        .collect();
                    streamed(deltas, Duration::ZERO, None, "tool_calls", usage)
                } else {
                    completion(
                        json!({"role": "assistant", "content": null, "tool_calls": calls}),
                        &usage,
                    )
                }
            }
            Step::ToolCall(name, args) => completion(
                json!({
                    "role": "assistant", "content": null,
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}]
                }),
                &usage,
            ),
            Step::Status(code, headers, body) => {
                let mut h = HeaderMap::new();
                for (k, v) in headers {
                    h.insert(
                        axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                        HeaderValue::from_str(&v).unwrap(),
                    );
                }
                (StatusCode::from_u16(code).unwrap(), h, body).into_response()
            }
            Step::Garbage(body) => (StatusCode::OK, body).into_response(),
            Step::Delay(d, inner) => {
                tokio::time::sleep(d).await;
                run(*inner, usage, stream).await
            }
            Step::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                StatusCode::GATEWAY_TIMEOUT.into_response()
            }
        }
    })
}

/// A message's text: its `content` string, or its text parts joined by newlines.
pub fn text_of(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
