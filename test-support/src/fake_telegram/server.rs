//! The fake's HTTP side: routes `/bot<token>/<method>`, decodes JSON, form and query parameters,
//! applies queued faults, and answers each method the way the Bot API does.
//!
//! Must not: hold the state lock across an await, or answer a method it does not know with
//! success (unknown methods get Telegram's 404 so a typo fails loudly).

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State as AxState;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

use super::form::params;
use super::json::{bot_user_json, chat_json, now_unix, replied_message_json};
use super::{Fault, SentMessage, State};

pub(super) fn router(state: Arc<State>) -> Router {
    Router::new().fallback(handle).with_state(state)
}

async fn handle(
    AxState(state): AxState<Arc<State>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(rest) = uri.path().strip_prefix("/file/bot") {
        return super::files::download(&state, rest, &headers).await;
    }
    let Some((token, method)) = uri
        .path()
        .strip_prefix("/bot")
        .and_then(|rest| rest.split_once('/'))
    else {
        return error(404, "Not Found");
    };
    if !state.admit(token) {
        return error(401, "Unauthorized");
    }
    let method = method.to_ascii_lowercase();
    let mut params = match params(&uri, &headers, &body) {
        Ok(params) => params,
        Err(description) => return error(400, &description),
    };
    if matches!(method.as_str(), "sendphoto" | "senddocument" | "sendvoice") {
        super::uploads::add_file_bytes(&headers, &body, &mut params);
    }
    let fault = {
        let mut inner = state.lock();
        inner
            .calls
            .entry(method.clone())
            .or_default()
            .push(params.clone());
        take_fault(inner.faults.get_mut(&method), &method, &params)
    };
    match fault {
        Some(Fault::RetryAfter(secs)) => {
            let description = format!("Too Many Requests: retry after {secs}");
            let body = json!({ "ok": false, "error_code": 429, "description": description,
                               "parameters": { "retry_after": secs } });
            (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response()
        }
        Some(Fault::ServerError) => error(500, "Internal Server Error"),
        Some(Fault::BadEntities) => error(
            400,
            "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 0",
        ),
        Some(Fault::Refused(description)) => error(400, &description),
        Some(Fault::Drop) => dropped_connection(),
        Some(Fault::DropAfterProcessing) => {
            let _ = answer(&state, &method, &params).await;
            dropped_connection()
        }
        Some(Fault::AnswerLate(delay)) => {
            let answered = answer(&state, &method, &params).await;
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = state.stop.cancelled() => {}
            }
            answered
        }
        Some(Fault::Delay(delay)) => {
            tokio::time::sleep(delay).await;
            answer(&state, &method, &params).await
        }
        None => answer(&state, &method, &params).await,
    }
}

/// Pops the fault for this call; `BadEntities` waits for a call that actually has a parse mode.
fn take_fault(
    queue: Option<&mut std::collections::VecDeque<Fault>>,
    method: &str,
    params: &Value,
) -> Option<Fault> {
    let queue = queue?;
    if queue.front() == Some(&Fault::BadEntities) {
        let formatted = matches!(method, "sendmessage" | "editmessagetext")
            && text_param(params, "parse_mode").is_some_and(|m| !m.is_empty());
        if !formatted {
            return None;
        }
    }
    queue.pop_front()
}

async fn answer(state: &State, method: &str, params: &Value) -> Response {
    match method {
        "getme" => ok(super::json::me_json(&state.token)),
        "getupdates" => get_updates(state, params).await,
        "sendmessage" => send_message(state, params),
        "sendphoto" | "senddocument" | "sendvoice" => {
            super::uploads::send_upload(state, method, params)
        }
        "editmessagetext" => edit_message_text(state, params),
        "deletemessage" => delete_message(state, params),
        "getfile" => super::files::get_file(state, params),
        "sendchataction" | "setmycommands" | "answercallbackquery" => ok(json!(true)),
        "deletewebhook" => {
            let mut inner = state.lock();
            inner.webhook_url.clear();
            if bool_param(params, "drop_pending_updates") {
                inner.updates.clear();
            }
            ok(json!(true))
        }
        "setwebhook" => {
            state.lock().webhook_url = text_param(params, "url").unwrap_or_default();
            ok(json!(true))
        }
        "getwebhookinfo" => {
            let inner = state.lock();
            ok(
                json!({ "url": inner.webhook_url, "has_custom_certificate": false,
                       "pending_update_count": inner.updates.len() }),
            )
        }
        _ => error(404, "Not Found"),
    }
}

/// True long polling: answers as soon as an update is queued, or with `[]` after `timeout`
/// seconds; a newer `getUpdates` ends a waiting one with 409, as on Telegram.
async fn get_updates(state: &State, params: &Value) -> Response {
    let limit = int_param(params, "limit").unwrap_or(100).clamp(1, 100) as usize;
    let timeout = int_param(params, "timeout").unwrap_or(0).max(0) as u64;
    let generation = {
        let mut inner = state.lock();
        if !inner.webhook_url.is_empty() {
            return error(409, "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first");
        }
        match int_param(params, "offset") {
            // A negative offset keeps only the last -offset updates and forgets the rest.
            Some(offset) if offset < 0 => {
                let keep = offset.unsigned_abs() as usize;
                while inner.updates.len() > keep {
                    inner.updates.pop_front();
                }
            }
            Some(offset) => inner
                .updates
                .retain(|u| u["update_id"].as_i64().is_some_and(|id| id >= offset)),
            None => {}
        }
        inner.poll_generation += 1;
        inner.poll_generation
    };
    state.changed.notify_waiters();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    loop {
        let notified = state.changed.notified();
        tokio::pin!(notified);
        // Registered before looking, so a push between the look and the wait still wakes us.
        notified.as_mut().enable();
        {
            let inner = state.lock();
            if inner.poll_generation != generation {
                return error(409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running");
            }
            let batch: Vec<Value> = inner.updates.iter().take(limit).cloned().collect();
            if !batch.is_empty() || tokio::time::Instant::now() >= deadline {
                return ok(Value::Array(batch));
            }
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = state.stop.cancelled() => return ok(json!([])),
        }
    }
}

fn send_message(state: &State, params: &Value) -> Response {
    let Some(chat_id) = int_param(params, "chat_id") else {
        return error(400, "Bad Request: chat not found");
    };
    let text = text_param(params, "text").unwrap_or_default();
    if text.trim().is_empty() {
        return error(400, "Bad Request: message text is empty");
    }
    // Telegram counts the limit "after entities parsing": HTML tags and escapes are free.
    if visible_len(&text, text_param(params, "parse_mode").as_deref()) > 4096 {
        return error(400, "Bad Request: message is too long");
    }
    let thread_id = int_param(params, "message_thread_id");
    let reply_to = params
        .get("reply_parameters")
        .and_then(object_param)
        .and_then(|r| int_param(&r, "message_id"))
        .or_else(|| int_param(params, "reply_to_message_id"));
    let mut inner = state.lock();
    let message_id = inner.next_message_id;
    inner.next_message_id += 1;
    let replied_text = reply_to.and_then(|id| {
        let known = inner.sent.iter().find(|m| m.message_id == id);
        known.map(|m| m.text.clone())
    });
    let sent = SentMessage {
        chat_id,
        thread_id,
        text: text.clone(),
        parse_mode: text_param(params, "parse_mode"),
        reply_to,
        message_id,
        buttons: button_data(params),
    };
    let at = std::time::Instant::now();
    inner
        .sent_listeners
        .retain(|l| l.send((sent.clone(), at)).is_ok());
    inner.sent.push(sent);
    inner.sent_at.push(at);
    drop(inner);
    let mut message = bot_message(state, message_id, chat_id, thread_id, &text);
    if let Some(reply_to) = reply_to {
        let author = match replied_text {
            Some(_) => bot_user_json(&state.token),
            None => super::json::user_json(chat_id.abs()),
        };
        let text = replied_text.unwrap_or_default();
        message["reply_to_message"] =
            replied_message_json(reply_to, &message["chat"], author, &text);
    }
    ok(message)
}

fn edit_message_text(state: &State, params: &Value) -> Response {
    let (Some(chat_id), Some(message_id)) = (
        int_param(params, "chat_id"),
        int_param(params, "message_id"),
    ) else {
        return error(400, "Bad Request: message to edit not found");
    };
    let text = text_param(params, "text").unwrap_or_default();
    if text.trim().is_empty() {
        return error(400, "Bad Request: message text is empty");
    }
    let parse_mode = text_param(params, "parse_mode");
    if visible_len(&text, parse_mode.as_deref()) > 4096 {
        return error(400, "Bad Request: MESSAGE_TOO_LONG");
    }
    let mut inner = state.lock();
    let current = inner
        .view(chat_id)
        .into_iter()
        .find(|m| m.message_id == message_id);
    let Some(current) = current else {
        return error(400, "Bad Request: message to edit not found");
    };
    let thread_id = current.thread_id;
    if current.text == text && current.parse_mode == parse_mode {
        return error(
            400,
            "Bad Request: message is not modified: specified new message content and reply markup are \
             exactly the same as a current content and reply markup of the message",
        );
    }
    let edit = super::EditedMessage {
        chat_id,
        message_id,
        text: text.clone(),
        parse_mode,
        at: std::time::Instant::now(),
    };
    inner
        .edit_listeners
        .retain(|l| l.send(edit.clone()).is_ok());
    inner.edits.push(edit);
    drop(inner);
    let mut message = bot_message(state, message_id, chat_id, thread_id, &text);
    message["edit_date"] = json!(now_unix());
    ok(message)
}

fn delete_message(state: &State, params: &Value) -> Response {
    let (Some(chat_id), Some(message_id)) = (
        int_param(params, "chat_id"),
        int_param(params, "message_id"),
    ) else {
        return error(400, "Bad Request: message to delete not found");
    };
    let mut inner = state.lock();
    if !inner
        .view(chat_id)
        .iter()
        .any(|m| m.message_id == message_id)
    {
        return error(400, "Bad Request: message to delete not found");
    }
    inner.deleted.push((chat_id, message_id));
    ok(json!(true))
}

fn bot_message(state: &State, id: i64, chat_id: i64, thread: Option<i64>, text: &str) -> Value {
    let mut message = json!({
        "message_id": id,
        "from": bot_user_json(&state.token),
        "chat": chat_json(chat_id, thread.is_some()),
        "date": now_unix(),
        "text": text,
    });
    if let Some(thread_id) = thread {
        message["message_thread_id"] = json!(thread_id);
        message["is_topic_message"] = json!(true);
    }
    message
}

/// An integer given as a JSON number or, from a form, as a decimal string.
pub(super) fn int_param(params: &Value, key: &str) -> Option<i64> {
    match params.get(key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

pub(super) fn text_param(params: &Value, key: &str) -> Option<String> {
    match params.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn bool_param(params: &Value, key: &str) -> bool {
    match params.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    }
}

/// An object given inline (JSON body) or JSON-serialized in a string (form body), as Telegram
/// accepts both.
/// The `callback_data` of every inline keyboard button of a `reply_markup`, row by row.
fn button_data(params: &Value) -> Vec<String> {
    let Some(markup) = params.get("reply_markup").and_then(object_param) else {
        return Vec::new();
    };
    markup["inline_keyboard"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|b| b["callback_data"].as_str().map(str::to_string))
        .collect()
}

fn object_param(value: &Value) -> Option<Value> {
    match value {
        Value::Object(_) => Some(value.clone()),
        Value::String(s) => serde_json::from_str(s).ok(),
        _ => None,
    }
}

pub(super) fn ok(result: Value) -> Response {
    axum::Json(json!({ "ok": true, "result": result })).into_response()
}

pub(super) fn error(code: u16, description: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    let body = json!({ "ok": false, "error_code": code, "description": description });
    (status, axum::Json(body)).into_response()
}

/// Headers go out, then the body fails, so hyper aborts the connection: the client sees a
/// network error and no answer.
fn dropped_connection() -> Response {
    let failing = futures::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other(
            "fake telegram dropped the connection",
        ))
    });
    let mut response = Response::new(Body::from_stream(failing));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// Length in UTF-16 units of what the user sees: for HTML, tags removed and the four escapes
/// counted as one character each; other modes are measured raw (stricter than Telegram).
fn visible_len(text: &str, parse_mode: Option<&str>) -> usize {
    if !parse_mode.is_some_and(|m| m.eq_ignore_ascii_case("html")) {
        return text.encode_utf16().count();
    }
    let mut visible = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => visible.push(c),
            _ => {}
        }
    }
    let unescaped = visible
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    unescaped.encode_utf16().count()
}
