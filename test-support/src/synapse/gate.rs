//! A pass-through in front of Synapse for the bot's client: every request goes to the
//! homeserver unchanged and its answer comes back unchanged, while the gate notes when the
//! homeserver accepted each `PUT …/send/m.room.message/…` (the moment a message exists for
//! the people) and, when a test asks, answers the next one itself with the 429 Synapse sends
//! (`M_LIMIT_EXCEEDED`, `retry_after_ms`, and a `Retry-After` header).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::net::TcpListener;

#[derive(Default)]
struct Record {
    /// When each message send was accepted, in order.
    sends: Vec<Instant>,
    /// Message sends to refuse, each with this many seconds.
    refuse: Vec<u64>,
    /// Message sends refused so far.
    refused: usize,
    /// (room id, event id) of each accepted message send, in order.
    accepted: Vec<(String, String)>,
}

#[derive(Clone)]
struct Shared {
    upstream: String,
    http: reqwest::Client,
    record: Arc<Mutex<Record>>,
}

pub struct Gate {
    url: String,
    record: Arc<Mutex<Record>>,
    task: tokio::task::JoinHandle<()>,
}

impl Gate {
    /// Starts the gate on a free port in front of `upstream` (Synapse's URL).
    pub async fn start(upstream: &str) -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let record = Arc::new(Mutex::new(Record::default()));
        let shared = Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            http: reqwest::Client::new(),
            record: record.clone(),
        };
        let app = axum::Router::new().fallback(forward).with_state(shared);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Gate { url, record, task }
    }

    /// The URL the bot is given as its homeserver.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The next message send gets 429 with `Retry-After: secs`.
    pub fn refuse_next_send(&self, secs: u64) {
        self.record.lock().unwrap().refuse.push(secs);
    }

    /// When Synapse accepted each message the bot sent, in order.
    pub fn send_times(&self) -> Vec<Instant> {
        self.record.lock().unwrap().sends.clone()
    }

    /// (room id, event id) of every message Synapse accepted from the bot, in order.
    pub fn accepted(&self) -> Vec<(String, String)> {
        self.record.lock().unwrap().accepted.clone()
    }

    /// Message sends answered with 429 so far.
    pub fn refused(&self) -> usize {
        self.record.lock().unwrap().refused
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The room id of a `/rooms/{roomId}/send/…` path, percent-decoded.
fn room_of(path: &str) -> String {
    let encoded = path
        .split("/rooms/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("");
    url::form_urlencoded::parse(format!("r={encoded}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

fn is_message_send(method: &str, path: &str) -> bool {
    method == "PUT"
        && (path.contains("/send/m.room.message/") || path.contains("/send/m.room.encrypted/"))
}

async fn forward(State(s): State<Shared>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let sending = is_message_send(method.as_str(), &path);
    if sending {
        let refuse = {
            let mut r = s.record.lock().unwrap();
            let next = (!r.refuse.is_empty()).then(|| r.refuse.remove(0));
            if next.is_some() {
                r.refused += 1;
            }
            next
        };
        if let Some(secs) = refuse {
            let body = json!({
                "errcode": "M_LIMIT_EXCEEDED",
                "error": "Too Many Requests",
                "retry_after_ms": secs * 1000,
            });
            let mut headers = HeaderMap::new();
            headers.insert("retry-after", secs.to_string().parse().unwrap());
            return (StatusCode::TOO_MANY_REQUESTS, headers, axum::Json(body)).into_response();
        }
    }
    let headers = req.headers().clone();
    let Ok(body) = to_bytes(req.into_body(), usize::MAX).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let mut out = s
        .http
        .request(method, format!("{}{path}", s.upstream))
        .body(body);
    for (name, value) in headers.iter() {
        if name != "host" && name != "content-length" {
            out = out.header(name, value);
        }
    }
    let Ok(answer) = out.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = answer.status();
    let mut response = Response::builder().status(status);
    for (name, value) in answer.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            response = response.header(name, value);
        }
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    if sending && status.is_success() {
        let event = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v["event_id"].as_str().map(str::to_string))
            .unwrap_or_default();
        let mut r = s.record.lock().unwrap();
        r.sends.push(Instant::now());
        r.accepted.push((room_of(&path), event));
    }
    response
        .body(Body::from(bytes))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}
