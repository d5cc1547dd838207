//! The fake's HTTP side: routes the Web API (`/api/<method>`), the upload URLs, the private
//! file host, `response_url`s and the control endpoints; reads each call's arguments (`args.rs`);
//! checks the token, its type and the method's scope; applies queued faults; and
//! records every call with the time it arrived.
//!
//! Must not: answer an unknown method with success, or an `ok:false` with anything but HTTP 200
//! (Slack's errors are in the body; only rate limits and queued statuses change the code).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::args::{parse_args, Args};
use super::records::Call;
use super::state::State;
use super::{Fault, Shared};

pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    let app = Router::new().fallback(handle).with_state(shared);
    let _ = axum::serve(listener, app).await;
}

async fn handle(
    AxState(shared): AxState<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    if let Some(name) = path.strip_prefix("/api/") {
        return api(&shared, &method, name, &uri, &headers, &body).await;
    }
    if let Some(token) = path.strip_prefix("/upload/v1/") {
        return super::files::receive_upload(&shared, token, &headers, &body);
    }
    if path.starts_with("/files-pri/") && method == Method::GET {
        return super::files::serve_private(&shared, &path, &headers);
    }
    if path.starts_with("/_fake/") {
        return super::control::control(&shared, &method, &path, &body);
    }
    (StatusCode::NOT_FOUND, "not found").into_response()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TokenKind {
    Bot,
    App,
}

/// Which scope a method needs: fixed, or by the kind of its `channel`.
enum Scope {
    None,
    Fixed(&'static str),
    /// `<family>:<suffix>`: `channels:history`, `im:read`, …
    OfChannel(&'static str),
}

type Handler = fn(&Arc<Shared>, &Args) -> Value;

/// The methods the fake knows: name, token type, scope, handler.
const METHODS: &[(&str, TokenKind, Scope, Handler)] = &[
    ("auth.test", TokenKind::Bot, Scope::None, auth_test),
    (
        "apps.connections.open",
        TokenKind::App,
        Scope::Fixed("connections:write"),
        super::socket::connections_open,
    ),
    (
        "chat.postMessage",
        TokenKind::Bot,
        Scope::Fixed("chat:write"),
        super::chat::post_message,
    ),
    (
        "chat.update",
        TokenKind::Bot,
        Scope::Fixed("chat:write"),
        super::chat::update,
    ),
    (
        "chat.delete",
        TokenKind::Bot,
        Scope::Fixed("chat:write"),
        super::chat::delete,
    ),
    (
        "conversations.history",
        TokenKind::Bot,
        Scope::OfChannel("history"),
        super::conversations::history,
    ),
    (
        "conversations.replies",
        TokenKind::Bot,
        Scope::OfChannel("history"),
        super::conversations::replies,
    ),
    (
        "conversations.info",
        TokenKind::Bot,
        Scope::OfChannel("read"),
        super::conversations::info,
    ),
    (
        "users.info",
        TokenKind::Bot,
        Scope::Fixed("users:read"),
        super::conversations::user_info,
    ),
    (
        "files.getUploadURLExternal",
        TokenKind::Bot,
        Scope::Fixed("files:write"),
        super::files::get_upload_url,
    ),
    (
        "files.completeUploadExternal",
        TokenKind::Bot,
        Scope::Fixed("files:write"),
        super::files::complete_upload,
    ),
];

pub(crate) fn ok(mut body: Value) -> Value {
    if let Value::Object(o) = &mut body {
        o.insert("ok".into(), json!(true));
        return body;
    }
    json!({"ok": true})
}

pub(crate) fn err(code: &str) -> Value {
    json!({"ok": false, "error": code})
}

async fn api(
    shared: &Arc<Shared>,
    http_method: &Method,
    name: &str,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let (at, at_ms) = State::stamp();
    let mut call = Call {
        method: name.to_string(),
        http_method: http_method.to_string(),
        args: Value::Null,
        status: 200,
        error: None,
        at,
        at_ms,
    };
    let spec = METHODS.iter().find(|(m, ..)| *m == name);
    let parsed = parse_args(uri, headers, body, name == "files.getUploadURLExternal");
    let (answer, scopes_header) = match (spec, parsed) {
        (None, _) => (
            json!({"ok": false, "error": "unknown_method", "req_method": name}),
            None,
        ),
        (Some(_), Err(code)) => (err(code), None),
        (Some((_, kind, scope, handler)), Ok(args)) => {
            call.args = args.recorded();
            match authorize(shared, headers, &args, *kind) {
                Err(e) => (err(e), None),
                Ok(scopes) => {
                    let fault = {
                        let mut st = shared.lock();
                        st.faults.get_mut(name).and_then(|q| q.pop_front())
                    };
                    match fault {
                        Some(Fault::RateLimited { retry_after_secs }) => {
                            return finish(shared, call, rate_limited(retry_after_secs));
                        }
                        Some(Fault::Status(code)) => {
                            let status =
                                StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
                            return finish(shared, call, status.into_response());
                        }
                        Some(Fault::Error(code)) => (err(&code), Some(scopes)),
                        Some(Fault::Delay(d)) => {
                            tokio::time::sleep(d).await;
                            (
                                answer_checked(shared, &args, scope, *handler, &scopes),
                                Some(scopes),
                            )
                        }
                        None => (
                            answer_checked(shared, &args, scope, *handler, &scopes),
                            Some(scopes),
                        ),
                    }
                }
            }
        }
    };
    let mut answer = answer;
    if answer["ok"] == true && json_without_charset(headers) {
        // Slack serves the call but says so, as it does.
        answer["warning"] = json!("missing_charset");
        answer["response_metadata"]["warnings"] = json!(["missing_charset"]);
    }
    let mut resp = (StatusCode::OK, axum::Json(answer.clone())).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    if let Some(scopes) = scopes_header.and_then(|s| HeaderValue::from_str(&s).ok()) {
        h.insert("x-oauth-scopes", scopes);
    }
    if answer["ok"] == false {
        call.error = answer["error"].as_str().map(str::to_string);
    }
    finish(shared, call, resp)
}

fn json_without_charset(headers: &HeaderMap) -> bool {
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    ctype.starts_with("application/json") && !ctype.contains("charset=utf-8")
}

fn finish(shared: &Shared, mut call: Call, resp: Response) -> Response {
    call.status = resp.status().as_u16();
    if call.status == 429 {
        call.error = Some("ratelimited".into());
    }
    shared.lock().rec.calls.push(call);
    resp
}

/// Checks the token and its type; returns the granted scopes (comma-separated) on success.
fn authorize(
    shared: &Shared,
    headers: &HeaderMap,
    args: &Args,
    wanted: TokenKind,
) -> Result<String, &'static str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::to_string);
    // A token inside a JSON body is not read: Slack takes it from the header then.
    let token = bearer.or_else(|| (!args.json).then(|| args.str("token")).flatten());
    let Some(token) = token else {
        return Err("not_authed");
    };
    let st = shared.lock();
    let kind = if token == shared.cfg.bot_token {
        TokenKind::Bot
    } else if token == shared.cfg.app_token {
        TokenKind::App
    } else {
        return Err("invalid_auth");
    };
    if st.revoked.contains(&token) {
        return Err("token_revoked");
    }
    if kind != wanted {
        return Err("not_allowed_token_type");
    }
    Ok(match kind {
        TokenKind::Bot => st.scopes.join(","),
        TokenKind::App => "connections:write".into(),
    })
}

fn answer_checked(
    shared: &Arc<Shared>,
    args: &Args,
    scope: &Scope,
    handler: Handler,
    granted: &str,
) -> Value {
    let needed = match scope {
        Scope::None => None,
        Scope::Fixed(s) => Some(s.to_string()),
        Scope::OfChannel(suffix) => {
            let st = shared.lock();
            let ch = args
                .str("channel")
                .and_then(|c| st.channels.get(&c).map(|c| c.kind));
            ch.map(|k| format!("{}:{suffix}", k.scope_family()))
        }
    };
    if let Some(needed) = needed {
        if !granted.split(',').any(|s| s == needed) {
            return json!({"ok": false, "error": "missing_scope", "needed": needed, "provided": granted});
        }
    }
    handler(shared, args)
}

fn rate_limited(retry_after_secs: u64) -> Response {
    let mut resp = (
        StatusCode::TOO_MANY_REQUESTS,
        axum::Json(err("ratelimited")),
    )
        .into_response();
    let h = resp.headers_mut();
    h.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    resp
}

fn auth_test(shared: &Arc<Shared>, _: &Args) -> Value {
    let c = &shared.cfg;
    ok(json!({
        "url": format!("https://{}.slack.com/", c.team_domain),
        "team": "Herald Fake Workspace",
        "user": shared.lock().user_name(&c.bot_user_id),
        "team_id": c.team_id,
        "user_id": c.bot_user_id,
        "bot_id": c.bot_id,
        "is_enterprise_install": false,
    }))
}
