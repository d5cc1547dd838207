//! The fake's own HTTP endpoints, for whoever drives it from outside the test process:
//! `POST /_fake/events` injects a message event, `GET /_fake/posted` lists what the bot
//! posted, edited, deleted and uploaded, and `POST /_fake/respond/…` is where `response_url`s
//! point (recorded).
//!
//! Must not: be reachable under `/api/`; these are not Slack methods.

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::envelopes::send_event;
use super::inject::user_message;
use super::records::UrlPost;
use super::Shared;

pub(crate) fn control(shared: &Arc<Shared>, method: &Method, path: &str, body: &[u8]) -> Response {
    match (method.as_str(), path) {
        ("POST", "/_fake/events") => inject(shared, body),
        ("GET", "/_fake/posted") => Json(posted(shared)).into_response(),
        ("POST", p) if p.starts_with("/_fake/respond/") => {
            let body = serde_json::from_slice(body)
                .unwrap_or_else(|_| json!(String::from_utf8_lossy(body).into_owned()));
            shared.lock().rec.url_posts.push(UrlPost {
                response_url: format!("{}{p}", shared.base),
                body,
                at: std::time::Instant::now(),
            });
            Json(json!({"ok": true})).into_response()
        }
        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

/// A message event without a `ts` (`{"channel","user","text","thread_ts"?}`) is a person's new
/// message: stored, and delivered as Slack would. Anything else is delivered as it is.
fn inject(shared: &Arc<Shared>, body: &[u8]) -> Response {
    let Ok(event) = serde_json::from_slice::<Value>(body) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"ok": false, "error": "invalid_json"})),
        )
            .into_response();
    };
    let plain = event.get("ts").is_none()
        && event.get("subtype").is_none()
        && event["type"].as_str().is_none_or(|t| t == "message");
    if plain {
        let (Some(channel), Some(user)) = (event["channel"].as_str(), event["user"].as_str())
        else {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"ok": false, "error": "channel and user are required"})),
            )
                .into_response();
        };
        let text = event["text"].as_str().unwrap_or_default();
        let thread = event["thread_ts"].as_str();
        let ts = user_message(shared, channel, user, text, thread, Vec::new());
        return Json(json!({"ok": true, "ts": ts})).into_response();
    }
    let event_id = send_event(shared, event);
    Json(json!({"ok": true, "event_id": event_id})).into_response()
}

fn posted(shared: &Shared) -> Value {
    let st = shared.lock();
    let r = &st.rec;
    json!({
        "posts": r.posts.iter().map(|p| json!({
            "channel": p.channel,
            "ts": p.ts,
            "text": p.text,
            "thread_ts": p.thread_ts,
            "blocks": p.blocks,
            "metadata": p.metadata,
        })).collect::<Vec<_>>(),
        "edits": r.edits.iter().map(|e| json!({
            "channel": e.channel,
            "ts": e.ts,
            "text": e.text,
        })).collect::<Vec<_>>(),
        "deletes": r.deletes.iter().map(|d| json!({"channel": d.channel, "ts": d.ts}))
            .collect::<Vec<_>>(),
        "uploads": r.uploads.iter().map(|u| json!({
            "file_id": u.file_id,
            "filename": u.filename,
            "title": u.title,
            "size": u.bytes.len(),
            "sha256": hex::encode(Sha256::digest(&u.bytes)),
            "channel": u.channel,
            "thread_ts": u.thread_ts,
            "initial_comment": u.initial_comment,
        })).collect::<Vec<_>>(),
    })
}
