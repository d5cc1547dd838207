//! A tiny HTTP server that answers every request `200 ok` and remembers its method, path and
//! headers: the place a test points a redirect or a URL at, to see whether Herald went there
//! and what it sent.
//!
//! Must not: answer anything a client could mistake for a file it asked for (the body is `ok`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::Router;

/// One request the recorder received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Every header, name and value, in arrival order.
    pub headers: Vec<(String, String)>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// The running recorder; stops when dropped.
pub struct Recorder {
    addr: SocketAddr,
    seen: Log,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    pub async fn start() -> Recorder {
        let seen = Log::default();
        let app = Router::new().fallback(record).with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Recorder { addr, seen, task }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn record(
    State(seen): State<Log>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> &'static str {
    let entry = Seen {
        method: method.to_string(),
        path: uri.path().to_string(),
        headers: header_list(&headers),
    };
    seen.lock().unwrap_or_else(|e| e.into_inner()).push(entry);
    "ok"
}

/// Headers as (name, value) text pairs; a value that is not text is kept lossily.
pub fn header_list(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}
