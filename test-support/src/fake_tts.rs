//! A fake OpenAI-compatible speech API: `POST /v1/audio/speech` with a JSON body (`model`,
//! `input`, `voice`, `response_format`), answered with a small Ogg/Opus-looking body that
//! names the text it spoke, or with the scripted failure. Every request is recorded, so a test
//! can check what Herald asked for and that the bytes it got are the ones Telegram received.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// What the next request gets; with nothing scripted, audio.
#[derive(Debug, Clone)]
pub enum TtsStep {
    /// An error status with OpenAI's error body.
    Status(u16, String),
    /// Audio, after this long (a speech API slower than Herald waits).
    Delay(std::time::Duration),
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct TtsRequest {
    pub body: Value,
    pub authorization: Option<String>,
}

#[derive(Default)]
struct Inner {
    script: VecDeque<TtsStep>,
    requests: Vec<TtsRequest>,
}

/// The running fake; stops when dropped.
pub struct FakeTts {
    addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

/// The audio the fake answers for `input`: an Ogg page header and the text.
pub fn audio_for(input: &str) -> Vec<u8> {
    let mut bytes = b"OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00OpusHead".to_vec();
    bytes.extend_from_slice(input.as_bytes());
    bytes
}

impl FakeTts {
    pub async fn start() -> FakeTts {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/v1/audio/speech", post(speech))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeTts { addr, inner, task }
    }

    /// `http://127.0.0.1:<port>/v1`, as `voice.tts_url` names it.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push(&self, step: TtsStep) {
        self.inner.lock().unwrap().script.push_back(step);
    }

    pub fn requests(&self) -> Vec<TtsRequest> {
        self.inner.lock().unwrap().requests.clone()
    }
}

impl Drop for FakeTts {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn speech(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let step = {
        let mut inner = inner.lock().unwrap();
        inner.requests.push(TtsRequest {
            body: body.clone(),
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        });
        inner.script.pop_front()
    };
    match step {
        Some(TtsStep::Status(code, message)) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let error = json!({"error": {"message": message, "type": "server_error"}});
            return (status, Json(error)).into_response();
        }
        Some(TtsStep::Delay(d)) => tokio::time::sleep(d).await,
        None => {}
    }
    let input = body["input"].as_str().unwrap_or_default();
    ([(header::CONTENT_TYPE, "audio/ogg")], audio_for(input)).into_response()
}
