//! The daemon's `POST /api/v1/rpc`: one JSON-RPC 2.0 request in, one response out, with
//! signal-cli's method names, parameters, results and error codes (-1 user error, -3 I/O,
//! -5 rate limit, -32601 unknown method, -32602 bad params, -32603 internal).
//!
//! Must not: answer a JSON-RPC error with anything but HTTP 200 (signal-cli puts errors in the
//! body), or send anything for a call that met a fault.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{json, Value};

use super::state::{Call, Fault, Sent, SentFile, Signalled, State};
use super::Shared;

/// A JSON-RPC error as signal-cli writes it.
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Value,
}

fn user(message: impl Into<String>) -> RpcError {
    RpcError {
        code: -1,
        message: message.into(),
        data: Value::Null,
    }
}

fn params_error(message: &str) -> RpcError {
    RpcError {
        code: -32602,
        message: message.into(),
        data: Value::Null,
    }
}

pub(crate) async fn handle(
    AxState(shared): AxState<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json_type {
        return StatusCode::UNSUPPORTED_MEDIA_TYPE.into_response();
    }
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return answer(Value::Null, Err(rpc(-32700, "Failed to parse request")));
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    if req.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return answer(id, Err(rpc(-32600, "jsonrpc field must be set to 2.0")));
    }
    let Some(method) = req.get("method").and_then(Value::as_str) else {
        return answer(id, Err(rpc(-32600, "method field must be set")));
    };
    let params = req.get("params").cloned().unwrap_or(json!({}));
    let fault = {
        let mut st = shared.lock();
        st.calls.push(Call {
            method: method.to_string(),
            params: params.clone(),
            at: std::time::Instant::now(),
        });
        st.fault(method)
    };
    match fault {
        Some(Fault::Status(code)) => {
            return StatusCode::from_u16(code)
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
                .into_response()
        }
        Some(Fault::Error { code, message }) => return answer(id, Err(rpc(code, &message))),
        Some(Fault::RateLimited { retry_after_secs }) => {
            return answer(id, Err(rate_limited(&shared, &params, retry_after_secs)))
        }
        None => {}
    }
    let result = {
        let mut st = shared.lock();
        // `version` needs no account; every account method does.
        if !st.registered && method != "version" {
            Err(user("User is not registered."))
        } else {
            call(&mut st, method, &params)
        }
    };
    answer(id, result)
}

fn rpc(code: i64, message: &str) -> RpcError {
    RpcError {
        code,
        message: message.into(),
        data: Value::Null,
    }
}

fn answer(id: Value, result: Result<Value, RpcError>) -> Response {
    let body = match result {
        Ok(result) => json!({"jsonrpc": "2.0", "result": result, "id": id}),
        Err(e) => json!({"jsonrpc": "2.0",
            "error": {"code": e.code, "message": e.message, "data": e.data}, "id": id}),
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn call(st: &mut State, method: &str, p: &Value) -> Result<Value, RpcError> {
    match method {
        "send" => send(st, p),
        "sendTyping" => {
            let chat = one_chat(p)?;
            let stop = p.get("stop").and_then(Value::as_bool) == Some(true);
            let what = if stop { "typing-stop" } else { "typing" };
            st.signalled.push(Signalled {
                chat,
                what: what.into(),
                target: None,
            });
            Ok(json!({}))
        }
        "sendReaction" => {
            let chat = one_chat(p)?;
            let emoji = str_param(p, "emoji").ok_or_else(|| params_error("emoji missing"))?;
            let target = p.get("targetTimestamp").and_then(Value::as_u64);
            if target.is_none() || str_param(p, "targetAuthor").is_none() {
                return Err(params_error("targetAuthor and targetTimestamp are required"));
            }
            st.signalled.push(Signalled {
                chat: chat.clone(),
                what: emoji,
                target,
            });
            let ts = st.stamp();
            Ok(json!({"timestamp": ts, "results": results(st, &chat)}))
        }
        "getAttachment" => get_attachment(st, p),
        "remoteDelete" => {
            let chat = one_chat(p)?;
            let target = p
                .get("targetTimestamp")
                .and_then(Value::as_u64)
                .ok_or_else(|| params_error("targetTimestamp is required"))?;
            st.deleted.push((chat.clone(), target));
            let ts = st.stamp();
            Ok(json!({"timestamp": ts, "results": results(st, &chat)}))
        }
        "listGroups" => Ok(Value::Array(
            st.groups
                .iter()
                .map(|(id, (name, members))| {
                    json!({"id": id, "name": name, "isMember": true, "isBlocked": false,
                        "members": members.iter().map(|m| json!({"number": m})).collect::<Vec<_>>()})
                })
                .collect(),
        )),
        "version" => Ok(json!({"version": super::VERSION})),
        "getUserStatus" => {
            let who = list_param(p, "recipient");
            Ok(Value::Array(
                who.iter()
                    .map(|r| json!({"recipient": r, "number": r, "uuid": null, "isRegistered": true}))
                    .collect(),
            ))
        }
        // Single-account mode (`signal-cli -a ACCOUNT daemon`): the multi-account methods are
        // not there.
        _ => Err(rpc(-32601, "Method not implemented")),
    }
}

fn str_param(p: &Value, key: &str) -> Option<String> {
    match p.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Array(a) => a.first().and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

/// A parameter that takes one value or an array of them (signal-cli accepts both).
fn list_param(p: &Value, key: &str) -> Vec<String> {
    match p.get(key) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// The one conversation a call is for: a recipient, or `group:<id>`.
fn one_chat(p: &Value) -> Result<String, RpcError> {
    if let Some(g) = str_param(p, "groupId") {
        return Ok(format!("group:{g}"));
    }
    str_param(p, "recipient").ok_or_else(|| user("No recipients given"))
}

fn results(st: &State, chat: &str) -> Vec<Value> {
    let address = |r: &str| {
        if r.starts_with('+') {
            json!({"uuid": null, "number": r, "username": null})
        } else {
            json!({"uuid": r, "number": null, "username": null})
        }
    };
    match chat.strip_prefix("group:") {
        Some(g) => {
            let members = st.groups.get(g).map(|(_, m)| m.clone()).unwrap_or_default();
            members
                .iter()
                .map(|m| json!({"recipientAddress": address(m), "groupId": g, "type": "SUCCESS"}))
                .collect()
        }
        None => vec![json!({"recipientAddress": address(chat), "type": "SUCCESS"})],
    }
}

fn send(st: &mut State, p: &Value) -> Result<Value, RpcError> {
    let chat = one_chat(p)?;
    if let Some(g) = chat.strip_prefix("group:") {
        if !st.groups.contains_key(g) {
            return Err(user(format!("Group not found: {g}")));
        }
    }
    let message = str_param(p, "message").unwrap_or_default();
    let mut paths = list_param(p, "attachments");
    paths.extend(list_param(p, "attachment"));
    if message.is_empty() && paths.is_empty() {
        return Err(user(
            "Sending empty message is not allowed, either a message, attachment or sticker must be given.",
        ));
    }
    let quote = match p.get("quoteTimestamp").and_then(Value::as_u64) {
        Some(ts) => match str_param(p, "quoteAuthor") {
            Some(author) => Some((ts, author)),
            None => return Err(user("Quote author parameter is missing")),
        },
        None => None,
    };
    let mut attachments = Vec::new();
    for path in &paths {
        // The daemon reads the file when it sends, from its own file system.
        let bytes = std::fs::read(path).map_err(|e| RpcError {
            code: -32603,
            message: format!(
                "Failed to send message: {path}: {e} (AttachmentInvalidException) (UnexpectedErrorException)"
            ),
            data: Value::Null,
        })?;
        let name = std::path::Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        attachments.push(SentFile { name, bytes });
    }
    let timestamp = st.stamp();
    st.sent.push(Sent {
        timestamp,
        at: std::time::Instant::now(),
        at_ms: chrono::Utc::now().timestamp_millis(),
        chat: chat.clone(),
        message,
        attachments,
        quote,
        edit_of: p.get("editTimestamp").and_then(Value::as_u64),
    });
    Ok(json!({"timestamp": timestamp, "results": results(st, &chat)}))
}

/// A send refused by the rate limit: error -5 with the per-recipient results in `data`.
fn rate_limited(shared: &Shared, p: &Value, secs: u64) -> RpcError {
    let chat = one_chat(p).unwrap_or_default();
    let mut st = shared.lock();
    let results: Vec<Value> = results(&st, &chat)
        .into_iter()
        .map(|mut r| {
            r["type"] = json!("RATE_LIMIT_FAILURE");
            r["retryAfterSeconds"] = json!(secs);
            r
        })
        .collect();
    let ts = st.stamp();
    RpcError {
        code: -5,
        message: "Failed to send message due to rate limiting".into(),
        data: json!({"response": {"timestamp": ts, "results": results}}),
    }
}

fn get_attachment(st: &State, p: &Value) -> Result<Value, RpcError> {
    let id = str_param(p, "id").ok_or_else(|| user("Missing attachment id parameter"))?;
    if str_param(p, "recipient").is_none() && str_param(p, "groupId").is_none() {
        return Err(params_error("recipient or groupId is required"));
    }
    match st.attachments.get(&id) {
        Some(stored) => {
            Ok(json!({"data": base64::engine::general_purpose::STANDARD.encode(&stored.bytes)}))
        }
        None => Err(user(format!("Could not find attachment with ID: {id}"))),
    }
}
