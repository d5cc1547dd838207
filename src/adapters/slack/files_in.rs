//! Files a person shares: Slack serves them at `url_private` only with the bot token, which
//! the media path (`media/fetch.rs`) does not send. So the adapter fetches them itself when the
//! event arrives, under `media.max_bytes`, into the media cache, and the event carries a
//! `Cached` reference that the media path reads like a web upload (vision, transcription,
//! documents). A file announced over the cap is not fetched: its attachment keeps the size, and
//! the media path answers that it is too large, as on the other platforms.
//!
//! Must not: send the bot token to any host but Slack's file host or the configured API host
//! (redirects are not followed), buffer more than the cap, or put a file URL into a log line.

use std::time::Duration;

use futures::StreamExt;

use super::inbound::FileRef;
use crate::domain::{Attachment, MediaKind, MediaSource};
use crate::media::MediaCache;

/// Slack's host for `url_private` downloads.
const FILE_HOST: &str = "files.slack.com";

pub struct FileFetch {
    http: reqwest::Client,
    /// The host of `api_url` (a proxy or the test fake serves files there too).
    api_host: Option<String>,
    max_bytes: u64,
    cache: MediaCache,
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("the file has no download URL")]
    NoUrl,
    #[error("the file URL is not on Slack's file host")]
    ForeignHost,
    #[error("the file is larger than media.max_bytes")]
    TooLarge,
    #[error("download failed: {0}")]
    Failed(String),
}

impl FileFetch {
    pub fn new(
        api_url: &url::Url,
        max_bytes: u64,
        timeout: Duration,
        cache: MediaCache,
    ) -> anyhow::Result<FileFetch> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(FileFetch {
            http,
            api_host: api_url.host_str().map(str::to_string),
            max_bytes,
            cache,
        })
    }

    /// The attachments of an event's files; a file that cannot be fetched is named in the
    /// returned notes instead (the person reads why).
    pub async fn attachments(
        &self,
        files: &[FileRef],
        token: &str,
    ) -> (Vec<Attachment>, Vec<String>) {
        let mut out = Vec::new();
        let mut notes = Vec::new();
        for f in files {
            let kind = f
                .mime
                .as_deref()
                .map_or(MediaKind::Document, MediaKind::from_mime);
            let announced_over = f.size.is_some_and(|s| s > self.max_bytes);
            let got = if announced_over {
                Err(FetchError::TooLarge)
            } else {
                self.fetch(f, token).await
            };
            let mut a = match got {
                Ok((sha, len)) => {
                    let mut a = Attachment::new(kind, MediaSource::Cached(sha.clone()));
                    a.sha256 = Some(sha);
                    a.size = Some(len);
                    a
                }
                Err(FetchError::TooLarge) => {
                    // Not fetched; the media path refuses it by its size, with the usual reply.
                    let mut a =
                        Attachment::new(kind, MediaSource::Url(f.url.clone().unwrap_or_default()));
                    a.size = Some(f.size.unwrap_or(self.max_bytes + 1).max(self.max_bytes + 1));
                    a
                }
                Err(e) => {
                    tracing::warn!(file = %f.id, error = %e, "could not fetch a Slack file");
                    notes.push(format!(
                        "(the file {} could not be fetched from Slack)",
                        f.name
                    ));
                    continue;
                }
            };
            a.name = Some(f.name.clone());
            a.mime = f.mime.clone();
            out.push(a);
        }
        (out, notes)
    }

    /// Downloads one file into the cache: (sha256, length).
    async fn fetch(&self, f: &FileRef, token: &str) -> Result<(String, u64), FetchError> {
        let raw = f.url.as_deref().ok_or(FetchError::NoUrl)?;
        let url = url::Url::parse(raw).map_err(|_| FetchError::NoUrl)?;
        let host = url.host_str().unwrap_or_default();
        let ours = host == FILE_HOST || self.api_host.as_deref() == Some(host);
        if !ours || !matches!(url.scheme(), "https" | "http") {
            return Err(FetchError::ForeignHost);
        }
        let res = self
            .http
            .get(url)
            .bearer_auth(token)
            .send()
            .await
            .map_err(|e| FetchError::Failed(e.without_url().to_string()))?;
        if !res.status().is_success() {
            return Err(FetchError::Failed(format!("HTTP {}", res.status())));
        }
        // Without the token Slack answers 200 with its login page: never a file we asked for.
        let html = res
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/html"))
            && !f
                .mime
                .as_deref()
                .is_some_and(|m| m.starts_with("text/html"));
        if html {
            return Err(FetchError::Failed(
                "Slack answered with a login page".into(),
            ));
        }
        if res.content_length().is_some_and(|n| n > self.max_bytes) {
            return Err(FetchError::TooLarge);
        }
        let mut bytes = Vec::new();
        let mut body = res.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| FetchError::Failed(e.without_url().to_string()))?;
            if (bytes.len() + chunk.len()) as u64 > self.max_bytes {
                return Err(FetchError::TooLarge);
            }
            bytes.extend_from_slice(&chunk);
        }
        let sha = self
            .cache
            .put(&bytes)
            .await
            .map_err(|e| FetchError::Failed(format!("media cache: {e}")))?;
        Ok((sha, bytes.len() as u64))
    }
}
