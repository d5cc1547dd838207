//! Uploads: `sendPhoto`, `sendDocument` and `sendVoice` with a multipart file, recorded byte for byte with
//! the file name and caption, so a test can check what a person would have received.
//!
//! The multipart body is read here as bytes (the form decoder keeps text fields only); the
//! file's bytes reach the method as a `__bytes` array next to its `{"file_name"}` field.
//! Must not: accept an upload without a file part or a chat.

use axum::body::Bytes;
use axum::http::{header, HeaderMap};
use axum::response::Response;
use serde_json::{json, Value};

use super::server::{error, int_param, ok, text_param};
use super::{FakeTelegram, State};

/// One file the bot sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// `sendPhoto`, `sendDocument` or `sendVoice`.
    pub method: String,
    pub chat_id: i64,
    pub thread_id: Option<i64>,
    pub file_name: String,
    pub bytes: Vec<u8>,
    pub caption: Option<String>,
    pub message_id: i64,
}

impl FakeTelegram {
    /// Every file the bot sent, in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.state.lock().uploads.clone()
    }
}

/// Adds each file part's bytes to the field that names it (`{"file_name", "__bytes"}`): the
/// field itself, or (as teloxide sends it) a field whose value is `attach://<part name>`.
pub(super) fn add_file_bytes(headers: &HeaderMap, body: &Bytes, params: &mut Value) {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Some(map) = params.as_object_mut() else {
        return;
    };
    for part in crate::multipart::file_parts(content_type, body) {
        let file = json!({ "file_name": part.file_name, "__bytes": part.bytes });
        let attach = format!("attach://{}", part.field);
        let named: Vec<String> = map
            .iter()
            .filter(|(_, v)| v.as_str() == Some(attach.as_str()))
            .map(|(k, _)| k.clone())
            .collect();
        for k in named {
            map.insert(k, file.clone());
        }
        if map
            .get(&part.field)
            .is_some_and(|f| f.get("file_name").is_some())
        {
            map.insert(part.field.clone(), file);
        }
    }
}

/// `sendPhoto` / `sendDocument` / `sendVoice`: records the upload, answers a message
/// carrying it.
pub(super) fn send_upload(state: &State, method: &str, params: &Value) -> Response {
    let field = match method {
        "sendphoto" => "photo",
        "sendvoice" => "voice",
        _ => "document",
    };
    let Some(chat_id) = int_param(params, "chat_id") else {
        return error(400, "Bad Request: chat not found");
    };
    let Some(file) = params.get(field).filter(|f| f.get("__bytes").is_some()) else {
        return error(400, "Bad Request: there is no file in the request");
    };
    let bytes: Vec<u8> = file["__bytes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b.as_u64().map(|b| b as u8))
        .collect();
    let file_name = file["file_name"].as_str().unwrap_or_default().to_string();
    let thread_id = int_param(params, "message_thread_id");
    let mut inner = state.lock();
    let message_id = inner.next_message_id;
    inner.next_message_id += 1;
    inner.uploads.push(Upload {
        method: match field {
            "photo" => "sendPhoto",
            "voice" => "sendVoice",
            _ => "sendDocument",
        }
        .into(),
        chat_id,
        thread_id,
        file_name: file_name.clone(),
        bytes: bytes.clone(),
        caption: text_param(params, "caption"),
        message_id,
    });
    drop(inner);
    let mut message = json!({
        "message_id": message_id,
        "from": super::json::bot_user_json(&state.token),
        "chat": super::json::chat_json(chat_id, thread_id.is_some()),
        "date": super::json::now_unix(),
    });
    let unique = format!("up{message_id}");
    if field == "voice" {
        message["voice"] = json!({ "file_id": unique, "file_unique_id": unique,
            "duration": 1, "mime_type": "audio/ogg", "file_size": bytes.len() });
    } else if field == "photo" {
        message["photo"] = json!([{ "file_id": unique, "file_unique_id": unique,
            "width": 1, "height": 1, "file_size": bytes.len() }]);
    } else {
        message["document"] = json!({ "file_id": unique, "file_unique_id": unique,
            "file_name": file_name, "file_size": bytes.len() });
    }
    if let Some(t) = thread_id {
        message["message_thread_id"] = json!(t);
        message["is_topic_message"] = json!(true);
    }
    ok(message)
}
