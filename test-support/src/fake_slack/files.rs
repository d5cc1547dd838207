//! Files both ways. Out: `files.getUploadURLExternal` hands out an upload URL on the fake, the
//! bytes are POSTed to it (raw or multipart), `files.completeUploadExternal` shares them in a
//! channel (recorded as an upload, shown in history). In: files people share are served at
//! `url_private` only with the bot token, as Slack serves them.
//!
//! Must not: serve a private file without the bot token. Slack answers such a request with its
//! sign-in page and status 200, not with a 401, and so does this fake: a client that does not
//! look at the content type stores an HTML page as the file.

use std::sync::Arc;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::args::Args;
use super::envelopes::send_event;
use super::payloads::{file_json, in_channel};
use super::records::{FileFetch, Upload};
use super::state::{Msg, PendingUpload, State, StoredFile};
use super::web::{err, ok};
use super::Shared;

/// The page Slack serves a browser (or a client) that is not signed in.
const LOGIN_PAGE: &str = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Slack</title></head><body><h1>Sign in to your workspace</h1>\
<form action=\"/signin\" method=\"post\"><input name=\"domain\"></form></body></html>";

/// The MIME type Slack gives a file, from its name (it does not trust the uploader's).
pub(crate) fn mime_of(name: &str) -> &'static str {
    let ext = name
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "txt" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "json" => "application/json",
        "ogg" | "oga" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        _ => "application/octet-stream",
    }
}

pub(crate) fn get_upload_url(shared: &Arc<Shared>, args: &Args) -> Value {
    let filename = args.str("filename");
    let length = args.str("length").and_then(|l| l.parse::<usize>().ok());
    let (Some(filename), Some(length)) = (filename, length) else {
        return err("invalid_arguments");
    };
    let mut st = shared.lock();
    let file_id = st.new_id("F");
    let token = uuid::Uuid::new_v4().simple().to_string();
    st.uploads.insert(
        token.clone(),
        PendingUpload {
            file_id: file_id.clone(),
            filename,
            length,
            bytes: None,
            content_type: None,
        },
    );
    ok(json!({
        "upload_url": format!("{}/upload/v1/{token}", shared.base),
        "file_id": file_id,
    }))
}

/// The upload URL: takes the raw body, or the first file part of a multipart body.
pub(crate) fn receive_upload(
    shared: &Shared,
    token: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string);
    let parts = crate::multipart::file_parts(ctype.as_deref().unwrap_or_default(), body);
    let bytes = match parts.into_iter().next() {
        Some(p) => p.bytes,
        None => body.to_vec(),
    };
    let mut st = shared.lock();
    let Some(up) = st.uploads.get_mut(token) else {
        return (StatusCode::NOT_FOUND, "upload not found").into_response();
    };
    let n = bytes.len();
    up.bytes = Some(bytes);
    up.content_type = ctype;
    (StatusCode::OK, format!("OK - {n}")).into_response()
}

pub(crate) fn complete_upload(shared: &Arc<Shared>, args: &Args) -> Value {
    let cfg = &shared.cfg;
    let entries = match args.json("files") {
        Ok(Some(Value::Array(a))) if !a.is_empty() => a,
        _ => return err("invalid_arguments"),
    };
    let channel = args.str("channel_id").or_else(|| {
        let list = args.str("channels")?;
        list.split(',').next().map(str::to_string)
    });
    let thread_ts = args.str("thread_ts");
    let comment = args.str("initial_comment");
    let mut st = shared.lock();
    if let Some(c) = &channel {
        match st.channels.get(c) {
            None => return err("channel_not_found"),
            Some(ch) if !ch.bot_member => return err("not_in_channel"),
            Some(_) => {}
        }
    }
    // Every id must name an upload whose bytes arrived; nothing is shared otherwise.
    let mut taken = Vec::new();
    for e in &entries {
        let id = e["id"].as_str().unwrap_or_default();
        let found = st
            .uploads
            .iter()
            .find(|(_, u)| u.file_id == id && u.bytes.is_some());
        let Some((token, _)) = found else {
            return err("file_not_found");
        };
        taken.push((token.clone(), e["title"].as_str().map(str::to_string)));
    }
    let created = chrono::Utc::now().timestamp();
    let mut files = Vec::new();
    let mut uploads = Vec::new();
    for (token, title) in taken {
        let up = st.uploads.remove(&token).expect("found above");
        let f = StoredFile {
            id: up.file_id.clone(),
            title: title.clone().unwrap_or_else(|| up.filename.clone()),
            mimetype: mime_of(&up.filename).to_string(),
            name: up.filename.clone(),
            bytes: up.bytes.clone().unwrap_or_default(),
            user: cfg.bot_user_id.clone(),
            created,
        };
        files.push(file_json(cfg, &shared.base, &f));
        st.files.insert(f.id.clone(), f);
        uploads.push((up, title));
    }
    let mut echo = None;
    let share_ts = channel.as_ref().map(|c| {
        let ts = st.next_ts();
        let msg = Msg {
            ts: ts.clone(),
            thread_ts: thread_ts.clone(),
            user: Some(cfg.bot_user_id.clone()),
            bot_id: Some(cfg.bot_id.clone()),
            app_id: Some(cfg.app_id.clone()),
            text: comment.clone().unwrap_or_default(),
            files: files.clone(),
            upload: true,
            ..Msg::default()
        };
        st.ensure_channel(c, None).messages.push(msg.clone());
        let kind = st.channels[c].kind;
        if st.echo_own && st.subscribed(kind.subscription()) {
            let mut event = in_channel(st.render(c, &msg, false, &cfg.team_id), c, kind, &ts);
            event["subtype"] = json!("file_share");
            echo = Some(event);
        }
        ts
    });
    let at = std::time::Instant::now();
    for (up, title) in uploads {
        st.rec.uploads.push(Upload {
            file_id: up.file_id,
            filename: up.filename,
            title,
            bytes: up.bytes.unwrap_or_default(),
            declared_length: up.length,
            content_type: up.content_type,
            channel: channel.clone(),
            thread_ts: thread_ts.clone(),
            initial_comment: comment.clone(),
            share_ts: share_ts.clone(),
            at,
        });
    }
    drop(st);
    if let Some(event) = echo {
        send_event(shared, event);
    }
    ok(json!({"files": files}))
}

/// A person's file, stored on the private host; returns its file object.
pub(crate) fn store_user_file(
    shared: &Shared,
    st: &mut State,
    user: &str,
    name: &str,
    mime: &str,
    bytes: Vec<u8>,
) -> Value {
    let f = StoredFile {
        id: st.new_id("F"),
        name: name.to_string(),
        title: name.to_string(),
        mimetype: mime.to_string(),
        bytes,
        user: user.to_string(),
        created: chrono::Utc::now().timestamp(),
    };
    let v = file_json(&shared.cfg, &shared.base, &f);
    st.files.insert(f.id.clone(), f);
    v
}

/// `GET /files-pri/<team>-<file id>/[download/]<name>`.
pub(crate) fn serve_private(shared: &Shared, path: &str, headers: &HeaderMap) -> Response {
    let rest = path.trim_start_matches("/files-pri/");
    let dir = rest.split('/').next().unwrap_or_default();
    let file_id = dir
        .strip_prefix(&format!("{}-", shared.cfg.team_id))
        .map(str::to_string);
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "));
    let mut st = shared.lock();
    let authorized = bearer == Some(shared.cfg.bot_token.as_str())
        && !st.revoked.contains(&shared.cfg.bot_token)
        && st.scopes.iter().any(|s| s == "files:read");
    let file = file_id.as_ref().and_then(|id| st.files.get(id)).cloned();
    let resp = match (&file, authorized) {
        (_, false) => {
            let mut r = (StatusCode::OK, LOGIN_PAGE).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            r
        }
        (None, true) => (StatusCode::NOT_FOUND, "file not found").into_response(),
        (Some(f), true) => {
            let mut r = (StatusCode::OK, f.bytes.clone()).into_response();
            if let Ok(v) = HeaderValue::from_str(&f.mimetype) {
                r.headers_mut().insert(header::CONTENT_TYPE, v);
            }
            r
        }
    };
    st.rec.file_fetches.push(FileFetch {
        path: path.to_string(),
        file_id,
        authorized,
        status: resp.status().as_u16(),
        at: std::time::Instant::now(),
    });
    resp
}
