//! A fake OpenAI-compatible speech-to-text server on 127.0.0.1 for tests.
//!
//! It parses the real multipart form of `POST /v1/audio/transcriptions` and records what a
//! test asserts on (the model, the file's name, content type and size, the auth header). Its
//! answers come from a script (a queue of steps); when the script is empty it answers
//! `{"text": "transcript of <file name>"}`. Steps can fail with any status, answer garbage, or
//! wait first (past the client's deadline).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::json;

#[derive(Clone, Debug)]
pub enum SttStep {
    /// 200 `{"text": ...}`.
    Transcript(String),
    /// Any status with a raw body (400 "unsupported format", 500, 401 quoting the key…).
    Status(u16, String),
    /// 200 with a body that is not a transcription answer.
    Garbage(String),
    /// Wait, then do the inner step.
    Delay(Duration, Box<SttStep>),
}

/// One request as the server parsed it.
#[derive(Clone, Debug, Default)]
pub struct SttRequest {
    pub model: Option<String>,
    pub response_format: Option<String>,
    pub file_name: Option<String>,
    pub content_type: Option<String>,
    pub size: usize,
    pub bytes: Vec<u8>,
    /// The `Authorization` header as sent.
    pub auth: Option<String>,
    /// Form fields other than the four above, by name.
    pub other_fields: Vec<String>,
}

#[derive(Default)]
struct Inner {
    script: VecDeque<SttStep>,
    requests: Vec<SttRequest>,
}

pub struct FakeStt {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeStt {
    pub async fn start() -> FakeStt {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/v1/audio/transcriptions", post(transcribe))
            .layer(axum::extract::DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeStt { addr, inner, task }
    }

    /// The base URL a client appends `/audio/transcriptions` to.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push(&self, step: SttStep) {
        self.inner.lock().unwrap().script.push_back(step);
    }

    pub fn requests(&self) -> Vec<SttRequest> {
        self.inner.lock().unwrap().requests.clone()
    }
}

impl Drop for FakeStt {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn transcribe(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    let mut req = SttRequest {
        auth: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        ..SttRequest::default()
    };
    loop {
        let field = match form.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => return (StatusCode::BAD_REQUEST, format!("bad form: {e}")).into_response(),
        };
        let name = field.name().unwrap_or_default().to_string();
        match name.as_str() {
            "file" => {
                req.file_name = field.file_name().map(str::to_string);
                req.content_type = field.content_type().map(str::to_string);
                let bytes = field.bytes().await.unwrap_or_default();
                req.size = bytes.len();
                req.bytes = bytes.to_vec();
            }
            "model" => req.model = field.text().await.ok(),
            "response_format" => req.response_format = field.text().await.ok(),
            _ => req.other_fields.push(name),
        }
    }
    let default_text = format!(
        "transcript of {}",
        req.file_name.as_deref().unwrap_or("(no name)")
    );
    let step = {
        let mut inner = inner.lock().unwrap();
        inner.requests.push(req);
        inner.script.pop_front()
    };
    answer(step.unwrap_or(SttStep::Transcript(default_text))).await
}

async fn answer(mut step: SttStep) -> Response {
    loop {
        match step {
            SttStep::Delay(d, inner) => {
                tokio::time::sleep(d).await;
                step = *inner;
            }
            SttStep::Transcript(text) => {
                return axum::Json(json!({ "text": text })).into_response();
            }
            SttStep::Status(code, body) => {
                let status =
                    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                return (status, body).into_response();
            }
            SttStep::Garbage(body) => {
                return (StatusCode::OK, [("content-type", "application/json")], body)
                    .into_response();
            }
        }
    }
}
