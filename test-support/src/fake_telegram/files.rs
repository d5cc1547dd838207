//! Files on the fake Bot API: `getFile` and the download route `GET /file/bot<token>/<path>`,
//! serving bytes a test registered, counting downloads, recording the headers of every
//! download request, and faults per file (slow, missing, a size `getFile` understates, a
//! redirect).
//!
//! Must not: answer a wrong token or an unknown path with bytes; hold the state lock across an
//! await.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{FakeTelegram, State};

/// What `getFile` answers for a registered file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    pub file_id: String,
    pub file_unique_id: String,
    /// The size `getFile` reports (the real one unless understated).
    pub file_size: u64,
    pub file_path: String,
}

/// How a registered file misbehaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileFault {
    /// The download sends its headers, then waits this long before the body.
    Slow(Duration),
    /// `getFile` answers, the download is a 404 (an expired file path).
    Missing,
    /// `getFile` reports this size, and the download is streamed in chunks without a
    /// `Content-Length`: the real size shows only while reading.
    Understated(u64),
    /// The download answers `302 Found` with this `Location` (a compromised file server).
    Redirect(String),
}

/// Chunk size of a streamed download.
const CHUNK: usize = 16 * 1024;

pub(crate) struct StoredFile {
    info: FileInfo,
    bytes: Arc<[u8]>,
    fault: Option<FileFault>,
    downloads: usize,
}

#[derive(Default)]
pub(crate) struct Files {
    by_id: HashMap<String, StoredFile>,
    /// The headers of every request to the download route, in order (any token, any path).
    requests: Vec<Vec<(String, String)>>,
}

impl FakeTelegram {
    /// Registers `bytes` under `file_id` (path `documents/file_<n>.<ext>` from the id's
    /// order) and returns what `getFile` will answer.
    pub fn add_file(&self, file_id: &str, bytes: &[u8]) -> FileInfo {
        let mut files = self.state.files();
        let n = files.by_id.len() + 1;
        let info = FileInfo {
            file_id: file_id.to_string(),
            file_unique_id: format!("u{n}"),
            file_size: bytes.len() as u64,
            file_path: format!("documents/file_{n}.bin"),
        };
        files.by_id.insert(
            file_id.to_string(),
            StoredFile {
                info: info.clone(),
                bytes: bytes.into(),
                fault: None,
                downloads: 0,
            },
        );
        info
    }

    /// Makes the registered file `file_id` misbehave from now on.
    pub fn set_file_fault(&self, file_id: &str, fault: FileFault) {
        let mut files = self.state.files();
        let file = files.by_id.get_mut(file_id).expect("file registered");
        if let FileFault::Understated(size) = fault {
            file.info.file_size = size;
        }
        file.fault = Some(fault);
    }

    /// The headers of every request the download route received, in order.
    pub fn download_headers(&self) -> Vec<Vec<(String, String)>> {
        self.state.files().requests.clone()
    }

    /// How many downloads of `file_id` were started (a 404 of a missing file counts).
    pub fn downloads(&self, file_id: &str) -> usize {
        let files = self.state.files();
        files.by_id.get(file_id).map_or(0, |f| f.downloads)
    }
}

/// `getFile`: the registered file's info, or Telegram's 400 for an unknown id.
pub(super) fn get_file(state: &State, params: &Value) -> Response {
    let id = params["file_id"].as_str().unwrap_or_default();
    let files = state.files();
    match files.by_id.get(id) {
        Some(f) => super::server::ok(json!({
            "file_id": f.info.file_id,
            "file_unique_id": f.info.file_unique_id,
            "file_size": f.info.file_size,
            "file_path": f.info.file_path,
        })),
        None => super::server::error(400, "Bad Request: invalid file_id"),
    }
}

/// `GET /file/bot<token>/<path>` (`rest` is what follows `/file/bot`).
pub(super) async fn download(state: &State, rest: &str, headers: &HeaderMap) -> Response {
    state
        .files()
        .requests
        .push(crate::recorder::header_list(headers));
    let Some((token, path)) = rest.split_once('/') else {
        return super::server::error(404, "Not Found");
    };
    if !state.admit(token) {
        return super::server::error(401, "Unauthorized");
    }
    let path = path.replace("%2F", "/").replace("%2f", "/");
    let found = {
        let mut files = state.files();
        let file = files.by_id.values_mut().find(|f| f.info.file_path == path);
        file.map(|f| {
            f.downloads += 1;
            (f.bytes.clone(), f.fault.clone())
        })
    };
    let Some((bytes, fault)) = found else {
        return super::server::error(404, "Not Found");
    };
    serve_bytes(bytes, fault.as_ref(), "application/octet-stream")
}

/// An answer carrying `bytes` as `fault` says: whole with a length, after a pause, chunked
/// without a length, a 404, or a redirect elsewhere.
pub fn serve_bytes(bytes: Arc<[u8]>, fault: Option<&FileFault>, mime: &str) -> Response {
    let content_type = [(header::CONTENT_TYPE, mime.to_string())];
    match fault {
        None => (content_type, Bytes::copy_from_slice(&bytes)).into_response(),
        Some(FileFault::Missing) => (StatusCode::NOT_FOUND, "Not Found").into_response(),
        Some(FileFault::Redirect(to)) => {
            (StatusCode::FOUND, [(header::LOCATION, to.clone())]).into_response()
        }
        Some(FileFault::Slow(pause)) => {
            let pause = *pause;
            let body = futures::stream::once(async move {
                tokio::time::sleep(pause).await;
                Ok::<_, std::io::Error>(Bytes::copy_from_slice(&bytes))
            });
            (content_type, Body::from_stream(body)).into_response()
        }
        Some(FileFault::Understated(_)) => {
            let chunks: Vec<Result<Bytes, std::io::Error>> = bytes
                .chunks(CHUNK)
                .map(|c| Ok(Bytes::copy_from_slice(c)))
                .collect();
            (
                content_type,
                Body::from_stream(futures::stream::iter(chunks)),
            )
                .into_response()
        }
    }
}

impl State {
    pub(super) fn files(&self) -> std::sync::MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }
}
