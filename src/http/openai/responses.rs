//! `POST /v1/responses`: the Responses API on the same turn path. A response's id is its
//! inbox row's random public id (`resp_<public id>`, stored beside the row), so
//! `previous_response_id` continues that response's conversation — only for the key that made
//! it; any other id is "not found". With `stream: true` the answer
//! comes as the Responses events (`response.created` … `response.output_text.delta` …
//! `response.completed`).

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

use super::input::{turn_input, Content, InMessage};
use super::stream::{progress, Progress};
use super::turn::{self, Answer, Ask};
use super::{KeyCaller, OaiError};
use crate::domain::Platform;
use crate::http::HttpState;

#[derive(Deserialize)]
struct Request {
    model: String,
    input: Input,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    previous_response_id: Option<String>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    Text(String),
    Items(Vec<InMessage>),
}

pub(super) async fn create(
    State(state): State<HttpState>,
    Extension(caller): Extension<KeyCaller>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OaiError> {
    let req: Request = super::parse(&body)?;
    super::models::check(&state, &req.model)?;
    let messages = match req.input {
        Input::Text(t) => vec![InMessage {
            role: "user".into(),
            content: Some(Content::Text(t)),
        }],
        Input::Items(items) => items,
    };
    let conversation = match &req.previous_response_id {
        Some(id) => previous_conversation(&state, &caller, id).await?,
        None => turn::conversation(&headers, req.user.as_deref())?,
    };
    let ask = Ask {
        conversation,
        input: turn_input(
            &messages,
            req.instructions.as_deref(),
            state.config.api.accept_system,
        )?,
        dedup: turn::dedup_key(&headers, &body)?,
    };
    let mut sub = turn::submit(&state, &caller, &ask, req.stream).await?;
    let shape = Shape {
        id: sub.public_id.clone(),
        model: req.model,
        previous: req.previous_response_id,
        created: chrono::Utc::now().timestamp(),
    };
    if !req.stream {
        let answer = turn::wait(&state, sub.inbox_id, sub.fresh, &mut sub.finished).await?;
        return Ok(Json(shape.response(Some(&answer))).into_response());
    }
    let id = sub.public_id.clone();
    let opening = shape.opening();
    let mut streamed = String::new();
    let delta = move |t: &str| {
        (
            "response.output_text.delta",
            json!({ "item_id": format!("msg_{id}"), "output_index": 0, "content_index": 0,
                "delta": t, "logprobs": [] }),
        )
    };
    let events = progress(state, sub).flat_map(move |p| {
        let out = match p {
            Progress::Text(t) => {
                streamed.push_str(&t);
                vec![delta(&t)]
            }
            Progress::Done(Err(e)) => vec![("error", e.body())],
            Progress::Done(Ok(mut a)) => {
                let mut out = Vec::new();
                if !a.text.is_empty() {
                    out.push(delta(&a.text));
                }
                streamed.push_str(&a.text);
                a.text = std::mem::take(&mut streamed);
                out.extend(shape.closing(&a));
                out
            }
        };
        futures::stream::iter(out)
    });
    let data = futures::stream::iter(opening)
        .chain(events)
        .enumerate()
        .map(|(n, (kind, mut v))| {
            v["type"] = json!(kind);
            v["sequence_number"] = json!(n);
            Ok::<_, Infallible>(Event::default().event(kind).data(v.to_string()))
        });
    Ok(Sse::new(data)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The conversation of an earlier response of this key.
async fn previous_conversation(
    state: &HttpState,
    caller: &KeyCaller,
    id: &str,
) -> Result<String, OaiError> {
    let missing = || OaiError::not_found("response_not_found", format!("no response {id:?}"));
    let public = id.strip_prefix("resp_").ok_or_else(missing)?;
    let row = match state.store.inbox_by_public_id(public).await {
        Ok(Some(n)) => state
            .store
            .inbox_get(n)
            .await
            .map(|r| r.ok_or_else(missing)),
        Ok(None) => return Err(missing()),
        Err(e) => Err(e),
    };
    let row = match row {
        Ok(row) => row?,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read an earlier API response");
            return Err(OaiError::unavailable(
                "the earlier response cannot be read now",
            ));
        }
    };
    let ev = row.event;
    if ev.platform != Platform::API || ev.chat_id != caller.name {
        return Err(missing());
    }
    ev.thread_id.ok_or_else(missing)
}

/// What every response object of one request shares.
struct Shape {
    /// The response's public id.
    id: String,
    model: String,
    previous: Option<String>,
    created: i64,
}

impl Shape {
    /// The response object: `in_progress` without an answer, `completed` with one.
    fn response(&self, answer: Option<&Answer>) -> Value {
        let id = &self.id;
        let (status, output, usage) = match answer {
            None => ("in_progress", json!([]), Value::Null),
            Some(a) => (
                "completed",
                json!([{
                    "type": "message", "id": format!("msg_{id}"), "status": "completed",
                    "role": "assistant",
                    "content": [{ "type": "output_text", "text": a.text, "annotations": [] }],
                }]),
                json!({
                    "input_tokens": a.usage.prompt_tokens,
                    "input_tokens_details": {
                        "cached_tokens": a.usage.prompt_tokens_details.cached_tokens,
                    },
                    "output_tokens": a.usage.completion_tokens,
                    "output_tokens_details": { "reasoning_tokens": 0 },
                    "total_tokens": a.usage.total_tokens,
                }),
            ),
        };
        json!({
            "id": format!("resp_{id}"),
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": usage,
            "previous_response_id": self.previous,
            "parallel_tool_calls": false,
            "tool_choice": "auto",
            "tools": [],
            "error": null,
            "incomplete_details": null,
        })
    }

    /// The events that close a streamed response whose whole text is `a.text`.
    fn closing(&self, a: &Answer) -> Vec<(&'static str, Value)> {
        let item = format!("msg_{}", self.id);
        let part = json!({ "type": "output_text", "text": a.text, "annotations": [] });
        let done = self.response(Some(a));
        vec![
            (
                "response.output_text.done",
                json!({ "item_id": item, "output_index": 0, "content_index": 0,
                    "text": a.text, "logprobs": [] }),
            ),
            (
                "response.content_part.done",
                json!({ "item_id": item, "output_index": 0, "content_index": 0, "part": part }),
            ),
            (
                "response.output_item.done",
                json!({ "output_index": 0, "item": done["output"][0].clone() }),
            ),
            ("response.completed", json!({ "response": done })),
        ]
    }
}

impl Shape {
    /// The events that open a streamed response, before any text.
    fn opening(&self) -> Vec<(&'static str, serde_json::Value)> {
        let item = format!("msg_{}", self.id);
        vec![
            (
                "response.created",
                json!({ "response": self.response(None) }),
            ),
            (
                "response.in_progress",
                json!({ "response": self.response(None) }),
            ),
            (
                "response.output_item.added",
                json!({ "output_index": 0, "item": {
                    "type": "message", "id": item, "status": "in_progress", "role": "assistant",
                    "content": [] } }),
            ),
            (
                "response.content_part.added",
                json!({ "item_id": item, "output_index": 0, "content_index": 0,
                    "part": { "type": "output_text", "text": "", "annotations": [] } }),
            ),
        ]
    }
}
