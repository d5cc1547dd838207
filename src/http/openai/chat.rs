//! `POST /v1/chat/completions`: one request, one turn in the conversation's lane; the answer
//! as one `chat.completion`, or with `stream: true` as `chat.completion.chunk` events ending
//! in `data: [DONE]` (a usage chunk first with `stream_options.include_usage`).

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use super::input::{turn_input, InMessage};
use super::stream::{progress, Progress};
use super::turn::{self, Answer, Ask};
use super::{KeyCaller, OaiError};
use crate::http::HttpState;

#[derive(Deserialize)]
struct Request {
    model: String,
    messages: Vec<InMessage>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize, Default)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

pub(super) async fn completions(
    State(state): State<HttpState>,
    Extension(caller): Extension<KeyCaller>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OaiError> {
    let req: Request = super::parse(&body)?;
    super::models::check(&state, &req.model)?;
    let ask = Ask {
        conversation: turn::conversation(&headers, req.user.as_deref())?,
        input: turn_input(&req.messages, None, state.config.api.accept_system)?,
        dedup: turn::dedup_key(&headers, &body)?,
    };
    let mut sub = turn::submit(&state, &caller, &ask, req.stream).await?;
    if !req.stream {
        let answer = turn::wait(&state, sub.inbox_id, sub.fresh, &mut sub.finished).await?;
        return Ok(Json(completion(&req.model, &sub.public_id, &answer)).into_response());
    }
    let include_usage = req.stream_options.unwrap_or_default().include_usage;
    let chunk = Chunk {
        id: format!("chatcmpl-{}", sub.public_id),
        model: req.model,
        created: chrono::Utc::now().timestamp(),
        include_usage,
    };
    let first = chunk.delta(json!({ "role": "assistant", "content": "" }));
    let events = progress(state, sub).flat_map(move |p| {
        let out: Vec<Value> = match p {
            Progress::Text(t) => vec![chunk.delta(json!({ "content": t }))],
            Progress::Done(Err(e)) => vec![e.body()],
            Progress::Done(Ok(a)) => chunk.last(&a),
        };
        futures::stream::iter(out)
    });
    let data = futures::stream::once(async { first })
        .chain(events)
        .map(|v| Event::default().data(v.to_string()))
        .chain(futures::stream::once(async {
            Event::default().data("[DONE]")
        }))
        .map(Ok::<_, Infallible>);
    Ok(Sse::new(data)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The whole answer as a `chat.completion`.
fn completion(model: &str, public_id: &str, a: &Answer) -> Value {
    json!({
        "id": format!("chatcmpl-{public_id}"),
        "object": "chat.completion",
        "created": chrono::Utc::now().timestamp(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": a.text },
            "finish_reason": "stop",
        }],
        "usage": a.usage,
    })
}

/// The fields every chunk of one stream shares.
struct Chunk {
    id: String,
    model: String,
    created: i64,
    include_usage: bool,
}

impl Chunk {
    fn base(&self, choices: Value) -> Value {
        let mut v = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        });
        if self.include_usage {
            v["usage"] = Value::Null;
        }
        v
    }

    fn delta(&self, delta: Value) -> Value {
        self.base(json!([{ "index": 0, "delta": delta, "finish_reason": null }]))
    }

    /// The rest of the answer's text, the `stop` chunk and, when asked, the usage chunk.
    fn last(&self, a: &Answer) -> Vec<Value> {
        let mut out = Vec::new();
        if !a.text.is_empty() {
            out.push(self.delta(json!({ "content": a.text })));
        }
        out.push(self.base(json!([{ "index": 0, "delta": {}, "finish_reason": "stop" }])));
        if self.include_usage {
            let mut u = self.base(json!([]));
            u["usage"] = json!(a.usage);
            out.push(u);
        }
        out
    }
}
