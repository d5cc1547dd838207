//! The fake REST API under `/api/v10`: the routes a chat bot uses, recorded for assertions.
//!
//! It answers with Discord's status codes and bodies (204 where Discord sends no body, 401 for a
//! wrong token, 404 JSON for anything unknown, which is also logged so gaps in the fake show up
//! in test output instead of as mysterious adapter errors). It must not retry, queue or
//! rate-limit on its own: faults happen only when a test queued one.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::payloads::{self, BOT_USER_ID};
use super::{Fault, Followup, InteractionCallback, RegisteredCommand, SentMessage, Shared};

pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let app = Router::new().fallback(handle).with_state(shared);
    let _ = axum::serve(listener, app).await;
}

fn json_status(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

fn parse_id(v: &Value) -> Option<u64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let (&Method::GET, Some(rest)) = (&method, uri.path().strip_prefix("/attachments/")) {
        return super::cdn::serve(&shared, rest);
    }
    let Some(path) = uri.path().strip_prefix("/api/v10") else {
        return unknown(&shared, &method, uri.path());
    };
    let authorized = headers
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| h.strip_prefix("Bot ") == Some(shared.token.as_str()));
    if !authorized {
        return json_status(
            StatusCode::UNAUTHORIZED,
            payloads::error(0, "401: Unauthorized"),
        );
    }
    let fault = {
        let mut inner = shared.lock();
        inner.requests.push(format!("{method} {path}"));
        let at = inner
            .faults
            .iter()
            .position(|(p, _)| path.starts_with(p.as_str()));
        at.map(|i| inner.faults.remove(i).1)
    };
    match fault {
        Some(Fault::RateLimited { retry_after_secs }) => return rate_limited(retry_after_secs),
        Some(Fault::ServerError) => {
            return json_status(
                StatusCode::INTERNAL_SERVER_ERROR,
                payloads::error(0, "500: Internal Server Error"),
            )
        }
        Some(Fault::Delay(d)) => tokio::time::sleep(d).await,
        None => {}
    }
    let files = crate::multipart::file_parts(
        headers
            .get("content-type")
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default(),
        &body,
    );
    let body = request_json(&headers, &body);
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let m = method.as_str();
    match (m, segments.as_slice()) {
        ("GET", ["gateway"]) => Json(json!({"url": shared.gateway_url})).into_response(),
        ("GET", ["gateway", "bot"]) => Json(json!({
            "url": shared.gateway_url,
            "shards": shared.recommended_shards.load(std::sync::atomic::Ordering::Relaxed),
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1},
        }))
        .into_response(),
        ("GET", ["users", "@me"]) => Json(payloads::user(BOT_USER_ID)).into_response(),
        ("GET", ["oauth2", "applications", "@me"] | ["applications", "@me"]) => {
            Json(payloads::application_info()).into_response()
        }
        ("GET", ["channels", id]) => {
            let chan = id.parse().ok().and_then(|id: u64| shared.lock().channels.get(&id).cloned());
            match chan {
                Some(c) => Json(c).into_response(),
                None => json_status(StatusCode::NOT_FOUND, payloads::error(10003, "Unknown Channel")),
            }
        }
        ("POST", ["channels", id, "messages"]) => match id.parse() {
            Ok(channel_id) => Json(send_message(&shared, channel_id, body, files)).into_response(),
            Err(_) => unknown(&shared, &method, path),
        },
        ("PATCH", ["channels", channel, "messages", message]) => {
            match (channel.parse(), message.parse()) {
                (Ok(c), Ok(m)) => edit_message(&shared, c, m, body),
                _ => unknown(&shared, &method, path),
            }
        }
        ("DELETE", ["channels", channel, "messages", message]) => {
            match (channel.parse::<u64>(), message.parse::<u64>()) {
                (Ok(c), Ok(m)) => {
                    let mut inner = shared.lock();
                    let known = inner.sent.iter().any(|s| s.channel_id == c && s.message_id == m);
                    if !known || inner.deleted.contains(&m) {
                        return json_status(StatusCode::NOT_FOUND, payloads::error(10008, "Unknown Message"));
                    }
                    inner.deleted.push(m);
                    no_content()
                }
                _ => unknown(&shared, &method, path),
            }
        }
        ("POST", ["channels", id, "typing"]) => match id.parse::<u64>() {
            Ok(channel_id) => {
                *shared.lock().typing.entry(channel_id).or_default() += 1;
                no_content()
            }
            Err(_) => unknown(&shared, &method, path),
        },
        (_, ["applications", _, "commands"]) => commands(&shared, m, None, body),
        (_, ["applications", _, "guilds", guild, "commands"]) => {
            commands(&shared, m, guild.parse().ok(), body)
        }
        ("POST", ["interactions", id, token, "callback"]) => {
            shared.lock().callbacks.push(InteractionCallback {
                interaction_id: id.parse().unwrap_or(0),
                token: token.to_string(),
                kind: body["type"].as_u64().unwrap_or(0),
                data: body.get("data").cloned(),
            });
            no_content()
        }
        ("POST", ["webhooks", _, token]) => followup(&shared, m, token, None, body),
        ("PATCH" | "GET", ["webhooks", _, token, "messages", target]) => {
            followup(&shared, m, token, Some(target), body)
        }
        ("DELETE", ["webhooks", _, token, "messages", target]) => {
            followup(&shared, m, token, Some(target), body);
            no_content()
        }
        _ => unknown(&shared, &method, path),
    }
}

fn unknown(shared: &Shared, method: &Method, path: &str) -> Response {
    let route = format!("{method} {path}");
    eprintln!("fake discord: no route for {route} (answering 404)");
    shared.lock().unknown_routes.push(route);
    json_status(StatusCode::NOT_FOUND, payloads::error(0, "404: Not Found"))
}

fn rate_limited(retry_after_secs: f64) -> Response {
    let mut resp = json_status(
        StatusCode::TOO_MANY_REQUESTS,
        payloads::rate_limited(retry_after_secs),
    );
    let h = resp.headers_mut();
    let secs = retry_after_secs.to_string();
    let retry_after = (retry_after_secs.ceil() as u64).to_string();
    for (name, value) in [
        ("retry-after", retry_after.as_str()),
        ("x-ratelimit-limit", "5"),
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset-after", secs.as_str()),
        ("x-ratelimit-bucket", "fake-bucket"),
        ("x-ratelimit-scope", "user"),
    ] {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(name, v);
        }
    }
    resp
}

/// JSON body, or the `payload_json` part of a multipart upload (the files are read apart).
fn request_json(headers: &HeaderMap, body: &[u8]) -> Value {
    let text = String::from_utf8_lossy(body);
    let ctype = headers
        .get("content-type")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if ctype.starts_with("multipart/form-data") {
        let part = text
            .split("name=\"payload_json\"")
            .nth(1)
            .and_then(|rest| rest.split_once("\r\n\r\n"))
            .and_then(|(_, rest)| rest.split("\r\n--").next());
        return part
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
    }
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

fn send_message(
    shared: &Shared,
    channel_id: u64,
    body: Value,
    files: Vec<crate::multipart::FilePart>,
) -> Value {
    let message_id = shared.new_id();
    let content = body["content"].as_str().unwrap_or_default().to_string();
    let reference = parse_id(&body["message_reference"]["message_id"]);
    let mut inner = shared.lock();
    let guild_id = inner.channel_guild.get(&channel_id).copied();
    let msg = payloads::message(payloads::MessageParts {
        id: message_id,
        channel_id,
        guild_id,
        author_id: BOT_USER_ID,
        content: &content,
        mentions: vec![],
        reference: reference.map(|r| (r, inner.messages.get(&r).cloned())),
    });
    inner.messages.insert(message_id, msg.clone());
    inner.sent_at.push(std::time::Instant::now());
    inner.sent.push(SentMessage {
        channel_id,
        content,
        message_id,
        allowed_mentions: body.get("allowed_mentions").cloned(),
        reference,
        body,
        files,
    });
    if shared.echo_own_messages.load(Ordering::Relaxed) {
        shared.dispatch_locked(&mut inner, "MESSAGE_CREATE", msg.clone());
    }
    // A REST answer carries no guild_id; the gateway copy does.
    let mut answer = msg;
    if let Some(obj) = answer.as_object_mut() {
        obj.remove("guild_id");
    }
    answer
}

/// Edits a message the bot sent: Discord's 404 "Unknown Message" for anything else, and the
/// 2,000-character content limit.
fn edit_message(shared: &Shared, channel_id: u64, message_id: u64, body: Value) -> Response {
    let mut inner = shared.lock();
    let known = inner
        .sent
        .iter()
        .any(|s| s.channel_id == channel_id && s.message_id == message_id);
    if !known || inner.deleted.contains(&message_id) {
        return json_status(
            StatusCode::NOT_FOUND,
            payloads::error(10008, "Unknown Message"),
        );
    }
    let Some(msg) = inner.messages.get(&message_id).cloned() else {
        return json_status(
            StatusCode::NOT_FOUND,
            payloads::error(10008, "Unknown Message"),
        );
    };
    let mut msg = msg;
    if let Some(content) = body["content"].as_str() {
        if content.chars().count() > 2000 {
            return json_status(
                StatusCode::BAD_REQUEST,
                payloads::error(50035, "Invalid Form Body"),
            );
        }
        msg["content"] = json!(content);
        msg["edited_timestamp"] = json!(chrono::Utc::now().to_rfc3339());
        inner.edits.push(super::EditedMessage {
            channel_id,
            message_id,
            content: content.to_string(),
            at: std::time::Instant::now(),
            body: body.clone(),
        });
    }
    inner.messages.insert(message_id, msg.clone());
    if let Some(obj) = msg.as_object_mut() {
        obj.remove("guild_id");
    }
    Json(msg).into_response()
}

fn commands(shared: &Shared, method: &str, guild_id: Option<u64>, body: Value) -> Response {
    let mut inner = shared.lock();
    let echo = |body: &Value, id: u64| {
        let mut c = body.clone();
        c["id"] = json!(id.to_string());
        c["application_id"] = json!(BOT_USER_ID.to_string());
        c["version"] = json!(id.to_string());
        c["guild_id"] = json!(guild_id.map(|g| g.to_string()));
        for (key, default) in [("type", json!(1)), ("description", json!(""))] {
            if c.get(key).is_none() {
                c[key] = default;
            }
        }
        c
    };
    let record = |body: &Value, inner: &mut super::Inner| {
        let id = shared.new_id();
        let name = body["name"].as_str().unwrap_or_default().to_string();
        inner
            .commands
            .retain(|c| !(c.guild_id == guild_id && c.name == name));
        inner.commands.push(RegisteredCommand {
            guild_id,
            name,
            id,
            body: body.clone(),
        });
        echo(body, id)
    };
    match method {
        "PUT" => {
            // Bulk overwrite: the scope's list becomes exactly the body.
            inner.commands.retain(|c| c.guild_id != guild_id);
            let list = body.as_array().cloned().unwrap_or_default();
            let out: Vec<Value> = list.iter().map(|b| record(b, &mut inner)).collect();
            Json(Value::Array(out)).into_response()
        }
        "POST" => Json(record(&body, &mut inner)).into_response(),
        "GET" => {
            let out: Vec<Value> = inner
                .commands
                .iter()
                .filter(|c| c.guild_id == guild_id)
                .map(|c| echo(&c.body, c.id))
                .collect();
            Json(Value::Array(out)).into_response()
        }
        _ => json_status(
            StatusCode::METHOD_NOT_ALLOWED,
            payloads::error(0, "405: Method Not Allowed"),
        ),
    }
}

fn followup(
    shared: &Shared,
    method: &str,
    token: &str,
    target: Option<&str>,
    body: Value,
) -> Response {
    let message_id = match target.and_then(|t| t.parse().ok()) {
        Some(id) => id,
        None => shared.new_id(),
    };
    let content = body["content"].as_str().unwrap_or_default().to_string();
    let mut inner = shared.lock();
    // Message ids are non-zero in serenity: answer with the interaction's real channel.
    let channel_id = inner.interaction_channels.get(token).copied().unwrap_or(1);
    if method != "GET" {
        inner.followups.push(Followup {
            token: token.to_string(),
            method: method.to_string(),
            target: target.map(str::to_string),
            body,
            message_id,
        });
    }
    Json(payloads::message(payloads::MessageParts {
        id: message_id,
        channel_id,
        guild_id: None,
        author_id: BOT_USER_ID,
        content: &content,
        mentions: vec![],
        reference: None,
    }))
    .into_response()
}
