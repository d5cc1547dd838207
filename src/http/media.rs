//! `GET /api/v1/lanes/{lane}/media/{sha}`: a file a reply sent to a web chat lane, served from
//! the media cache to that lane only — the lane's outbox must hold a row that sent it, so a
//! hash learnt elsewhere (another lane's file, a person's upload) finds nothing. Behind the
//! same guard as the rest of the web chat.
//!
//! Only raster images are shown inline; anything else downloads as an attachment, and the
//! response is sandboxed, so a served file can never run as a page of this origin.

use axum::extract::{Path, State};
use axum::http::header::{
    HeaderValue, CACHE_CONTROL, CONTENT_DISPOSITION, CONTENT_SECURITY_POLICY, CONTENT_TYPE,
};
use axum::response::{IntoResponse, Response};

use super::{ApiError, HttpState};
use crate::domain::LaneKey;
use crate::media::MediaCache;

const INLINE: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

pub(super) async fn lane_file(
    State(state): State<HttpState>,
    Path((lane, sha)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let lane = LaneKey::parse(&lane);
    let missing = || ApiError::not_found("no such file in this conversation");
    if lane.platform() != "web" {
        return Err(missing());
    }
    let file = state
        .store
        .outbox_file(&lane, &sha)
        .await?
        .ok_or_else(missing)?;
    let cache = MediaCache::under(
        &state.config.server.data_dir,
        state.config.media.cache_hours,
    );
    let Some(bytes) = cache.get(&sha).await else {
        return Err(ApiError::new(
            axum::http::StatusCode::GONE,
            "the file is no longer available",
        ));
    };
    let mime = file
        .mime
        .as_deref()
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_default();
    let inline = INLINE.contains(&mime.as_str());
    let content_type = if inline {
        mime
    } else {
        "application/octet-stream".to_string()
    };
    let name: String = file
        .name
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .collect();
    let disposition = format!(
        "{}; filename=\"{}\"",
        if inline { "inline" } else { "attachment" },
        if name.is_empty() { "file" } else { &name }
    );
    let mut res = bytes.into_response();
    let h = res.headers_mut();
    let value = |s: &str| HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static("file"));
    h.insert(CONTENT_TYPE, value(&content_type));
    h.insert(CONTENT_DISPOSITION, value(&disposition));
    h.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=3600"),
    );
    h.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    Ok(res)
}
