//! Local fakes of the three search APIs `web_search` speaks, each in its real JSON shape:
//! SearXNG (`GET /search?q=…&format=json`, `results[]` of `title`/`url`/`content`; a 403
//! page when JSON output is off), Brave Search (`GET /res/v1/web/search` with
//! `X-Subscription-Token`, `web.results[]` of `title`/`url`/`description` with `<strong>`
//! marks; a 401 `ErrorResponse` for a bad token) and Tavily (`POST /search`, the key as
//! `Authorization: Bearer`, a JSON body with `query` and `max_results`; `results[]` of
//! `title`/`url`/`content`/`score`; 401 `{"detail":{"error":…}}` for a bad key).
//!
//! Must not: answer a request that lacks the provider's own key shape.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

/// Which API the fake speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Searxng,
    Brave,
    Tavily,
}

/// One search the fake answered or refused: the query and the count asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub query: String,
    pub count: Option<u64>,
}

#[derive(Clone)]
struct Shared {
    key: String,
    asked: Arc<Mutex<Vec<Asked>>>,
    /// SearXNG with JSON output switched off (its default): 403.
    json_off: Arc<Mutex<bool>>,
}

/// The running fake; stops when dropped.
pub struct FakeSearch {
    addr: SocketAddr,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl FakeSearch {
    /// A fake of `api` accepting `key` (ignored by SearXNG, which has none).
    pub async fn start(api: Api, key: &str) -> FakeSearch {
        let shared = Shared {
            key: key.to_string(),
            asked: Arc::default(),
            json_off: Arc::default(),
        };
        let router = match api {
            Api::Searxng => Router::new().route("/search", get(searxng)),
            Api::Brave => Router::new().route("/res/v1/web/search", get(brave)),
            Api::Tavily => Router::new().route("/search", post(tavily)),
        };
        let app = router.with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeSearch { addr, shared, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every search asked so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.shared.asked.lock().unwrap().clone()
    }

    /// SearXNG answers 403 from now on, as an instance without `json` in its formats does.
    pub fn switch_json_off(&self) {
        *self.shared.json_off.lock().unwrap() = true;
    }
}

impl Drop for FakeSearch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The two results every provider finds for `query`.
pub fn expected(query: &str) -> [(String, String, String); 2] {
    [
        (
            format!("Ferry timetable for {query}"),
            "https://ferry.example/timetable".to_string(),
            "Boats leave every 45 minutes from pier 3".to_string(),
        ),
        (
            "Harbour news".to_string(),
            "https://news.example/harbour".to_string(),
            "The winter schedule starts in November".to_string(),
        ),
    ]
}

fn record(s: &Shared, query: &str, count: Option<u64>) {
    s.asked.lock().unwrap().push(Asked {
        query: query.to_string(),
        count,
    });
}

async fn searxng(State(s): State<Shared>, Query(q): Query<Vec<(String, String)>>) -> Response {
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let query = get("q").unwrap_or_default();
    record(&s, &query, None);
    if *s.json_off.lock().unwrap() || get("format").as_deref() != Some("json") {
        return (StatusCode::FORBIDDEN, "<html><h1>403 Forbidden</h1></html>").into_response();
    }
    let results: Vec<Value> = expected(&query)
        .iter()
        .map(|(t, u, c)| json!({"title": t, "url": u, "content": c, "engine": "duckduckgo"}))
        .collect();
    Json(json!({"query": query, "number_of_results": 2, "results": results})).into_response()
}

async fn brave(
    State(s): State<Shared>,
    headers: HeaderMap,
    Query(q): Query<Vec<(String, String)>>,
) -> Response {
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let query = get("q").unwrap_or_default();
    record(&s, &query, get("count").and_then(|c| c.parse().ok()));
    let token = headers
        .get("x-subscription-token")
        .and_then(|v| v.to_str().ok());
    if token != Some(s.key.as_str()) {
        let body = json!({"type": "ErrorResponse", "error": {"id": "0d3e", "status": 401,
            "code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The provided subscription token is invalid."},
            "time": 1700000000});
        return (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    }
    let results: Vec<Value> = expected(&query)
        .iter()
        .map(|(t, u, c)| {
            let marked = c.replacen("45 minutes", "<strong>45 minutes</strong>", 1);
            json!({"type": "search_result", "title": t, "url": u, "description": marked})
        })
        .collect();
    Json(json!({"type": "search", "query": {"original": query},
        "web": {"type": "search", "results": results}}))
    .into_response()
}

async fn tavily(State(s): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let query = body["query"].as_str().unwrap_or_default().to_string();
    record(&s, &query, body["max_results"].as_u64());
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if bearer != Some(s.key.as_str()) {
        let body = json!({"detail": {"error": "Unauthorized: missing or invalid API key."}});
        return (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    }
    let results: Vec<Value> = expected(&query)
        .iter()
        .map(|(t, u, c)| json!({"title": t, "url": u, "content": c, "score": 0.8}))
        .collect();
    Json(json!({"query": query, "answer": null, "results": results, "response_time": 0.4}))
        .into_response()
}
