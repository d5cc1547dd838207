//! The web chat JSON API: post a message to a lane and get the reply after the turn; read a
//! lane's live transcript.
//!
//! The request goes through the same inbox, hooks, worker and outbox as every platform: the
//! web adapter is the core's test surface, so it must not take shortcuts.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::{ApiError, Caller, HttpState};
use crate::domain::{LaneKey, MessageEvent, MessageKind, Origin, Platform, SessionId};
use crate::store::{InboxInsert, InboxStatus, Store};

#[derive(Deserialize)]
pub(super) struct ChatRequest {
    lane: String,
    text: String,
    #[serde(default)]
    sender: Option<String>,
    /// Optional client-chosen id: posting the same id twice yields one turn and one reply.
    #[serde(default)]
    client_id: Option<String>,
    /// Answer with server-sent events (`chat_stream.rs`); so does `Accept: text/event-stream`.
    #[serde(default)]
    stream: bool,
}

#[derive(Serialize)]
pub(super) struct ChatReply {
    reply: String,
    session_id: Option<SessionId>,
    message_id: Option<i64>,
    status: InboxStatus,
    inbox_id: i64,
}

/// Longest `client_id`, `sender` and lane name accepted, in characters: they are keys and
/// labels, stored with every row of the conversation.
const MAX_ID_CHARS: usize = 128;

/// `POST /api/v1/chat`: the message goes into the lane's inbox; the answer is the reply
/// once the turn is over (or a stream of it, `chat_stream.rs`).
pub(super) async fn post_chat(
    State(state): State<HttpState>,
    caller: Option<Extension<Caller>>,
    headers: axum::http::HeaderMap,
    body: Result<Json<ChatRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let req = read_request(body)?;
    let name = checked_name(&req, state.config.web.max_message_chars)?;
    // Admitted by the access guard either way; this says whether as the local operator.
    let ev = event(
        &req,
        name,
        caller.is_some_and(|Extension(c)| c.trusted_local),
    );
    // Subscribe before the insert so the finish signal cannot slip past.
    let mut finished = state.ingest.subscribe_finished();
    let deltas = super::chat_stream::wanted(req.stream, &headers)
        .then(|| state.lanes.stream_hub().subscribe());
    let (inbox_id, fresh) = match state.ingest.ingest(&ev).await {
        Ok(r @ InboxInsert::Inserted(_)) => (r.id(), true),
        Ok(r) => (r.id(), false),
        Err(e) => {
            return Err(ApiError::unavailable(format!(
                "the message could not be stored; nothing was sent, try again: {e}"
            )))
        }
    };
    if let Some(deltas) = deltas {
        return Ok(super::chat_stream::respond(
            state, inbox_id, fresh, deltas, finished,
        ));
    }
    await_reply(&state, inbox_id, fresh, &mut finished).await
}

/// The body as a [`ChatRequest`], or what is wrong with it.
fn read_request(
    body: Result<Json<ChatRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<ChatRequest, ApiError> {
    match body {
        Ok(Json(req)) => Ok(req),
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is larger than {} bytes",
                super::MAX_BODY_BYTES
            ),
        )),
        Err(e) => Err(ApiError::bad_request(format!(
            "the body must be JSON like {{\"lane\": \"web:alice\", \"text\": \"hi\"}}: {e}"
        ))),
    }
}

/// The lane's name (`web:` taken off), once every field is within its limits.
fn checked_name(req: &ChatRequest, max_chars: usize) -> Result<&str, ApiError> {
    let name = req.lane.strip_prefix("web:").unwrap_or(&req.lane).trim();
    if name.is_empty() {
        return Err(ApiError::bad_request(
            "lane must be \"web:<name>\" with a non-empty name",
        ));
    }
    for (field, value) in [
        ("lane", Some(name)),
        ("client_id", req.client_id.as_deref()),
        ("sender", req.sender.as_deref()),
    ] {
        if value.is_some_and(|v| v.chars().count() > MAX_ID_CHARS) {
            return Err(ApiError::bad_request(format!(
                "{field} is longer than {MAX_ID_CHARS} characters"
            )));
        }
    }
    if req.sender.as_deref().is_some_and(|s| s.trim().is_empty()) {
        return Err(ApiError::bad_request(
            "sender is empty; leave it out instead",
        ));
    }
    if req.text.trim().is_empty() {
        return Err(ApiError::bad_request("text is empty"));
    }
    let chars = req.text.chars().count();
    if chars > max_chars {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the message has {chars} characters; the limit is {max_chars} (web.max_message_chars)"
            ),
        ));
    }
    Ok(name)
}

/// The person's message in lane `web:<name>`.
fn event(req: &ChatRequest, name: &str, from_loopback: bool) -> MessageEvent {
    let sender = req.sender.clone().unwrap_or_else(|| name.to_string());
    let mut ev = MessageEvent::new(
        Platform::WEB,
        name,
        &sender,
        &req.text,
        Origin::Person {
            kind: MessageKind::Text,
            from_loopback,
        },
        req.client_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        chrono::Utc::now(),
    );
    ev.sender_name = sender;
    ev
}

/// Waits for the turn on `inbox_id` to finish and answers with its reply; past
/// `web.reply_timeout_secs`, a 202 that says where the reply will appear.
async fn await_reply(
    state: &HttpState,
    inbox_id: i64,
    fresh: bool,
    finished: &mut tokio::sync::broadcast::Receiver<i64>,
) -> Result<Response, ApiError> {
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs(state.config.web.reply_timeout_secs);
    // A row inserted just now is pending: wait for the finish signal before the first read.
    if fresh {
        wait_finished(finished, inbox_id).await;
    }
    loop {
        match state.store.inbox_get(inbox_id).await {
            Ok(Some(row)) if row.status != InboxStatus::Pending => {
                return reply(
                    &*state.store,
                    inbox_id,
                    row.status,
                    row.session_id,
                    row.reply_message_id,
                )
                .await
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read inbox while waiting for a reply"),
        }
        wait_finished(finished, inbox_id).await;
        if tokio::time::Instant::now() > deadline {
            return Ok((
                StatusCode::ACCEPTED,
                Json(serde_json::json!({
                    "error": "the reply is taking longer than web.reply_timeout_secs; it will appear in the lane's messages",
                    "inbox_id": inbox_id,
                })),
            )
                .into_response());
        }
    }
}

/// Woken by our own finish signal, or after a poll interval (the turn may run on another
/// replica, whose signal never reaches us).
pub(super) async fn wait_finished(
    finished: &mut tokio::sync::broadcast::Receiver<i64>,
    inbox_id: i64,
) {
    let wait = tokio::time::timeout(Duration::from_millis(500), async {
        loop {
            match finished.recv().await {
                Ok(id) if id == inbox_id => return,
                Ok(_) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    std::future::pending::<()>().await
                }
            }
        }
    });
    let _ = wait.await;
}

pub(super) async fn reply(
    store: &dyn Store,
    inbox_id: i64,
    status: InboxStatus,
    session_id: Option<SessionId>,
    message_id: Option<i64>,
) -> Result<Response, ApiError> {
    let rows = store
        .outbox_for_inbox(inbox_id)
        .await
        .map_err(|e| ApiError::unavailable(format!("cannot read the reply: {e}")))?;
    if status == InboxStatus::Skipped && rows.is_empty() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "this sender is not allowed to talk to the agent",
        ));
    }
    // A file goes out as a row of its own with no text: it is not a line of the reply.
    let text: Vec<&str> = rows
        .iter()
        .map(|r| r.text.as_str())
        .filter(|t| !t.is_empty())
        .collect();
    Ok(Json(ChatReply {
        reply: text.join("\n"),
        session_id,
        message_id,
        status,
        inbox_id,
    })
    .into_response())
}

#[derive(Serialize)]
struct LaneMessage {
    id: i64,
    role: crate::domain::Role,
    content: String,
    created_at: i64,
}

/// The live transcript of the lane's current session (tool traffic left out).
pub(super) async fn lane_messages(
    State(state): State<HttpState>,
    Path(lane): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let store = &state.store;
    let lane = LaneKey::parse(&lane);
    let Some(session) = store.session_current(&lane).await? else {
        return Ok(Json(
            serde_json::json!({"lane": lane, "session_id": null, "messages": []}),
        ));
    };
    let msgs: Vec<LaneMessage> = store
        .messages(&session.id, true)
        .await?
        .into_iter()
        .filter(|m| m.tool_calls.is_empty() && m.role != crate::domain::Role::Tool)
        .map(|m| LaneMessage {
            id: m.id,
            role: m.role,
            content: m.content,
            created_at: m.created_at,
        })
        .collect();
    Ok(Json(
        serde_json::json!({"lane": lane, "session_id": session.id, "messages": msgs}),
    ))
}
