//! The Graph API side of the fake: `POST /{v}/{phone-number-id}/messages` (text, media by id,
//! interactive reply buttons, templates, read receipts with the typing indicator),
//! `POST /{v}/{phone-number-id}/media` (multipart upload), `GET /{v}/{node}` (a media id's
//! download URL, or the phone number's name), and the download URL itself, which serves the
//! bytes only with the bearer token.
//!
//! Refusals are Graph's: an HTTP 4xx with `{"error":{"message","type","code","error_subcode",
//! "fbtrace_id"}}`, the real codes (190 token, 100 parameter, 130429 throughput with HTTP 429,
//! 131047 outside the 24-hour window, 132001 unknown template).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Multipart, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::state::{Fault, Media, Read, Sent};
use super::{webhooks, Shared};

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/{version}/{phone}/messages", post(messages))
        .route("/{version}/{phone}/media", post(upload))
        .route("/{version}/{node}", get(node))
        .route("/whatsapp_business/attachments/", get(download))
        .with_state(shared)
}

/// A refusal on its way to becoming Graph's error answer (small, for `Result`s).
pub struct Refusal {
    status: u16,
    code: i64,
    message: String,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        error(self.status, self.code, &self.message)
    }
}

/// A refusal with Graph's status, code and message.
pub fn refuse(status: u16, code: i64, message: &str) -> Refusal {
    Refusal {
        status,
        code,
        message: message.to_string(),
    }
}

/// Graph's error answer.
pub fn error(status: u16, code: i64, message: &str) -> Response {
    let body = json!({"error": {
        "message": message,
        "type": "OAuthException",
        "code": code,
        "error_subcode": if code == 131047 { json!(2494010) } else { json!(null) },
        "fbtrace_id": "AbCdEfFakeTrace01",
    }});
    (StatusCode::from_u16(status).expect("a status"), Json(body)).into_response()
}

fn authorized(shared: &Shared, headers: &HeaderMap) -> Result<(), Refusal> {
    let want = format!("Bearer {}", shared.cfg.access_token);
    let given = headers.get("authorization").and_then(|v| v.to_str().ok());
    if given == Some(want.as_str()) {
        Ok(())
    } else {
        Err(refuse(
            401,
            190,
            "Invalid OAuth access token - Cannot parse access token",
        ))
    }
}

fn check_phone(shared: &Shared, phone: &str) -> Result<(), Refusal> {
    if phone == shared.cfg.phone_number_id {
        Ok(())
    } else {
        Err(refuse(400, 100, &format!(
            "Unsupported post request. Object with ID '{phone}' does not exist, cannot be loaded due to missing permissions, or does not support this operation."
        )))
    }
}

fn fault_answer(f: Fault) -> Response {
    match f {
        Fault::RateLimited { retry_after_secs } => {
            let mut r = error(429, 130429, "(#130429) Rate limit hit");
            if let Some(s) = retry_after_secs {
                r.headers_mut()
                    .insert("retry-after", s.to_string().parse().expect("a header"));
            }
            r
        }
        Fault::Reengagement => error(400, 131047, "(#131047) Re-engagement message"),
        Fault::InvalidToken => error(
            401,
            190,
            "Error validating access token: Session has expired",
        ),
        Fault::InvalidParameter => error(400, 100, "(#100) Invalid parameter"),
        Fault::AcceptedButLost => error(500, 1, "An unknown error occurred"),
    }
}

async fn messages(
    State(shared): State<Arc<Shared>>,
    Path((_v, phone)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Err(r) = authorized(&shared, &headers).and_then(|_| check_phone(&shared, &phone)) {
        return r.into_response();
    }
    if body["messaging_product"] != "whatsapp" {
        return error(
            400,
            100,
            "(#100) The parameter messaging_product is required.",
        );
    }
    if body.get("status").and_then(Value::as_str) == Some("read") {
        return read_receipt(&shared, &body);
    }
    let mut st = shared.lock();
    st.calls.push(("messages".into(), Instant::now()));
    let lost = match st.faults.pop_front() {
        Some(Fault::AcceptedButLost) => true,
        Some(f) => return fault_answer(f),
        None => false,
    };
    let to = body["to"]
        .as_str()
        .unwrap_or_default()
        .trim_start_matches('+')
        .to_string();
    if to.is_empty() || !to.bytes().all(|b| b.is_ascii_digit()) {
        return error(400, 100, "(#100) Invalid parameter: to");
    }
    let kind = body["type"].as_str().unwrap_or("text").to_string();
    let mut sent = Sent {
        wamid: String::new(),
        to: to.clone(),
        kind: kind.clone(),
        text: String::new(),
        context: body
            .pointer("/context/message_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        callback: body["biz_opaque_callback_data"]
            .as_str()
            .map(str::to_string),
        media_id: None,
        filename: None,
        buttons: Vec::new(),
        template: None,
        body: body.clone(),
        at: Instant::now(),
        at_ms: chrono::Utc::now().timestamp_millis(),
    };
    if let Err(r) = super::messages::read_message(&mut sent, &body, &st) {
        return r.into_response();
    }
    if kind != "template" && !st.in_window(&to) {
        return error(400, 131047, "(#131047) Re-engagement message");
    }
    sent.wamid = st.new_wamid();
    let wamid = sent.wamid.clone();
    let callback = sent.callback.clone();
    st.sent.push(sent);
    let auto = st.auto_status;
    drop(st);
    if auto {
        for status in ["sent", "delivered"] {
            webhooks::status(&shared, &wamid, &to, status, callback.as_deref(), None);
        }
    }
    if lost {
        return error(500, 1, "An unknown error occurred");
    }
    Json(json!({
        "messaging_product": "whatsapp",
        "contacts": [{"input": body["to"], "wa_id": to}],
        "messages": [{"id": wamid}],
    }))
    .into_response()
}

fn read_receipt(shared: &Shared, body: &Value) -> Response {
    let Some(wamid) = body["message_id"].as_str() else {
        return error(400, 100, "(#100) The parameter message_id is required.");
    };
    let typing = body
        .pointer("/typing_indicator/type")
        .and_then(Value::as_str)
        == Some("text");
    shared.lock().reads.push(Read {
        wamid: wamid.to_string(),
        typing,
    });
    Json(json!({"success": true})).into_response()
}

async fn upload(
    State(shared): State<Arc<Shared>>,
    Path((_v, phone)): Path<(String, String)>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    if let Err(r) = authorized(&shared, &headers).and_then(|_| check_phone(&shared, &phone)) {
        return r.into_response();
    }
    let (mut product, mut mime, mut file) = (None, None, None);
    while let Ok(Some(field)) = form.next_field().await {
        match field.name().unwrap_or_default() {
            "messaging_product" => product = field.text().await.ok(),
            "type" => mime = field.text().await.ok(),
            "file" => {
                let name = field.file_name().map(str::to_string);
                file = field.bytes().await.ok().map(|b| (name, b.to_vec()));
            }
            _ => {}
        }
    }
    if product.as_deref() != Some("whatsapp") {
        return error(
            400,
            100,
            "(#100) The parameter messaging_product is required.",
        );
    }
    let (Some(mime), Some((name, bytes))) = (mime, file) else {
        return error(400, 100, "(#100) The parameter file is required.");
    };
    let mut st = shared.lock();
    st.calls.push(("media".into(), Instant::now()));
    let id = st.new_media_id();
    st.media.insert(
        id.clone(),
        Media {
            id: id.clone(),
            mime,
            name,
            bytes,
            uploaded: true,
        },
    );
    Json(json!({ "id": id })).into_response()
}

async fn node(
    State(shared): State<Arc<Shared>>,
    Path((_v, node)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = authorized(&shared, &headers) {
        return r.into_response();
    }
    if node == shared.cfg.phone_number_id {
        return Json(json!({
            "display_phone_number": shared.cfg.display_phone_number,
            "verified_name": shared.cfg.verified_name,
            "id": node,
        }))
        .into_response();
    }
    let st = shared.lock();
    let Some(m) = st.media.get(&node) else {
        return error(400, 100, &format!(
            "Unsupported get request. Object with ID '{node}' does not exist, cannot be loaded due to missing permissions, or does not support this operation."
        ));
    };
    Json(json!({
        "messaging_product": "whatsapp",
        "url": format!("{}/whatsapp_business/attachments/?mid={}&ext=1&hash=ATfake", shared.base, m.id),
        "mime_type": m.mime,
        "sha256": super::messages::sha256_hex(&m.bytes),
        "file_size": m.bytes.len(),
        "id": m.id,
    }))
    .into_response()
}

async fn download(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if authorized(&shared, &headers).is_err() {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    }
    let st = shared.lock();
    match q.get("mid").and_then(|id| st.media.get(id)) {
        Some(m) => (
            [(axum::http::header::CONTENT_TYPE, m.mime.clone())],
            m.bytes.clone(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "Not Found").into_response(),
    }
}
