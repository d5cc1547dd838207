//! Fetching the bytes of an attachment by its reference, under `[media] max_bytes` and
//! `fetch_timeout_secs`: a Telegram file id through `getFile` and the file download URL, a URL
//! (Discord's CDN) as is, a hash from the media cache. Fetched bytes are cached by reference
//! so the next turn that shows the same file does not download it again. Every request goes
//! through `net::Guard`: a file server cannot redirect Herald to another host or make it reach
//! an internal address; the configured platform API hosts and `media.allow_private_hosts` are
//! the exceptions.
//!
//! Telegram is spoken over plain HTTP here (the two calls teloxide would make, on the URLs it
//! would build from `telegram.api_url`), since platform crates stay in `src/adapters`.
//! Must not: let the bot token reach an error, a log line, a metric or a request header (the
//! file URL contains it: the guard's errors carry no URL, it sends no `Referer`, and every
//! message is redacted once more); buffer more than the cap; sniff a MIME type (the reader
//! does).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

mod platform;

use super::{sha256_hex, MediaCache, MediaError};
use crate::config::{Config, Secret};
use crate::domain::{Attachment, MediaSource, Platform};
use crate::net::{Guard, HostRule, NetError, Policy};

/// Hosts Discord serves attachments from: a CDN URL may redirect between them.
const DISCORD_FILE_HOSTS: &[&str] = &["cdn.discordapp.com", "media.discordapp.net"];

/// The bytes of one attachment.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub bytes: Arc<[u8]>,
    /// The announced MIME type, else the response's `Content-Type`.
    pub mime: Option<String>,
    /// Lowercase hex SHA-256 of `bytes`.
    pub sha256: String,
}

/// Fetches attachments; cheap to clone (one HTTP client, shared).
#[derive(Clone)]
pub struct Fetcher {
    inner: Arc<Inner>,
}

struct Inner {
    guard: Guard,
    telegram: Option<Telegram>,
    /// Where a URL's redirect may go besides its own host: Discord's file hosts.
    url_hosts: Vec<HostRule>,
    /// The platforms whose files are fetched with their token, and the hosts it may go to.
    authorized: HashMap<Platform, platform::PlatformFiles>,
    max_bytes: u64,
    timeout: Duration,
    cache: MediaCache,
}

/// Where Telegram files come from: the Bot API base URL and the token.
struct Telegram {
    api_url: url::Url,
    token: Secret,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("telegram", &self.inner.telegram.is_some())
            .field("max_bytes", &self.inner.max_bytes)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

/// How one fetch ended, for the metric.
enum Got {
    Cached(Fetched),
    Downloaded(Fetched),
}

impl Fetcher {
    /// From the loaded config: the Telegram token and `api_url` (when Telegram is configured),
    /// `media.max_bytes`, `media.fetch_timeout_secs`, and the cache. No network yet.
    pub fn from_config(config: &Config, cache: MediaCache) -> Fetcher {
        let telegram = config.telegram.token.as_ref().and_then(|token| {
            // As the adapter parses it, so both reach the same server.
            let api_url =
                url::Url::parse(config.telegram.api_url.as_str().trim_end_matches('/')).ok()?;
            (!api_url.cannot_be_a_base() && !token.expose().is_empty()).then(|| Telegram {
                api_url,
                token: token.clone(),
            })
        });
        let timeout = Duration::from_secs(config.media.fetch_timeout_secs.max(1));
        let authorized = platform::bearers(config);
        let discord_api = HostRule::of_url(config.discord.api_url.url());
        // The platform APIs the operator configured are reached wherever they are (the test
        // fakes and self-hosted Bot API servers run on private addresses), and so are the
        // hosts listed in `media.allow_private_hosts`.
        let exempt = telegram
            .as_ref()
            .and_then(|t| HostRule::of_url(&t.api_url))
            .into_iter()
            .chain(discord_api.clone())
            .chain(authorized.values().flat_map(|f| f.bearer.hosts.clone()))
            .chain(
                config
                    .media
                    .allow_private_hosts
                    .iter()
                    .filter_map(|h| HostRule::parse(h)),
            )
            .collect();
        let url_hosts = DISCORD_FILE_HOSTS
            .iter()
            .filter_map(|h| HostRule::parse(h))
            .chain(discord_api)
            .collect();
        Fetcher {
            inner: Arc::new(Inner {
                guard: Guard::new(exempt, timeout),
                telegram,
                url_hosts,
                authorized,
                max_bytes: config.media.max_bytes,
                timeout,
                cache,
            }),
        }
    }

    /// The bytes of `a`: from the cache when they are there, else downloaded (and cached).
    pub async fn fetch(&self, a: &Attachment) -> Result<Fetched, MediaError> {
        let platform = platform(&a.source);
        let result = self.fetch_counted(a).await;
        let outcome = match &result {
            Ok(Got::Cached(_)) => "cached",
            Ok(Got::Downloaded(f)) => {
                metrics::counter!("herald_media_fetch_bytes_total", "platform" => platform.to_string())
                    .increment(f.bytes.len() as u64);
                "ok"
            }
            Err(MediaError::TooLarge { .. }) => "too_large",
            Err(MediaError::Timeout) => "timeout",
            Err(MediaError::Refused(_)) => "refused",
            Err(MediaError::NoSource(_)) => "no_source",
            Err(_) => "error",
        };
        metrics::counter!("herald_media_fetch_total", "platform" => platform.to_string(), "outcome" => outcome)
            .increment(1);
        match result {
            Ok(Got::Cached(f) | Got::Downloaded(f)) => Ok(f),
            Err(e) => {
                tracing::info!(platform, kind = ?a.kind, error = %e, "could not fetch an attachment");
                Err(e)
            }
        }
    }

    async fn fetch_counted(&self, a: &Attachment) -> Result<Got, MediaError> {
        let max = self.inner.max_bytes;
        if let Some(size) = a.size.filter(|s| *s > max) {
            return Err(MediaError::TooLarge { size, max });
        }
        let key = match &a.source {
            MediaSource::Telegram(id) => format!("telegram:{id}"),
            MediaSource::Url(url) => format!("url:{url}"),
            MediaSource::Authorized { platform, url } => format!("{platform}:{url}"),
            MediaSource::DiscordSticker(_) => return Err(MediaError::NoSource("Discord stickers")),
            MediaSource::Cached(sha) => {
                let bytes = self.inner.cache.get(sha).await.ok_or_else(gone)?;
                return self.cached(bytes, a).map(Got::Cached);
            }
        };
        if let Some(bytes) = self.inner.cache.get_fetched(&key).await {
            return self.cached(bytes, a).map(Got::Cached);
        }
        let download = async {
            match &a.source {
                MediaSource::Telegram(id) => self.telegram(id).await,
                MediaSource::Url(url) => self.get(url.as_str(), &self.inner.url_hosts).await,
                MediaSource::Authorized { platform, url } => self.authorized(*platform, url).await,
                _ => Err(gone()),
            }
        };
        let (bytes, content_type) = tokio::time::timeout(self.inner.timeout, download)
            .await
            .map_err(|_| MediaError::Timeout)??;
        let sha256 = match self.inner.cache.put_fetched(&key, &bytes).await {
            Ok(sha) => sha,
            Err(e) => {
                tracing::warn!(error = %e, "could not cache a fetched file; it will be fetched again");
                sha256_hex(&bytes)
            }
        };
        Ok(Got::Downloaded(Fetched {
            bytes: bytes.into(),
            mime: a.mime.clone().or(content_type),
            sha256,
        }))
    }

    /// Bytes from the cache, still under the cap (it may have been lowered since).
    fn cached(&self, bytes: Vec<u8>, a: &Attachment) -> Result<Fetched, MediaError> {
        let max = self.inner.max_bytes;
        if bytes.len() as u64 > max {
            return Err(MediaError::TooLarge {
                size: bytes.len() as u64,
                max,
            });
        }
        Ok(Fetched {
            sha256: sha256_hex(&bytes),
            bytes: bytes.into(),
            mime: a.mime.clone(),
        })
    }

    /// `getFile`, then the file download URL. Every error text is redacted of the token.
    async fn telegram(&self, file_id: &str) -> Result<(Vec<u8>, Option<String>), MediaError> {
        let tg = self
            .inner
            .telegram
            .as_ref()
            .ok_or(MediaError::NoSource("telegram"))?;
        let token = tg.token.expose();
        let result = async {
            let mut url = tg.api_url.clone();
            push_segments(&mut url, &[&format!("bot{token}"), "getFile"]);
            url.query_pairs_mut().append_pair("file_id", file_id);
            let answer = self
                .inner
                .guard
                .open(url.as_str(), &self.policy(&[]))
                .await
                .map_err(net_error)?
                .body()
                .await
                .map_err(net_error)?;
            let answer: BotAnswer = serde_json::from_slice(&answer.bytes).map_err(|e| {
                MediaError::Fetch(format!("Telegram's getFile answer is not JSON ({e})"))
            })?;
            let file = match answer {
                BotAnswer {
                    ok: true,
                    result: Some(file),
                    ..
                } => file,
                BotAnswer { description, .. } => {
                    let why = description.unwrap_or_else(|| "no answer".into());
                    return Err(MediaError::Fetch(format!("Telegram: {why}")));
                }
            };
            let max = self.inner.max_bytes;
            if let Some(size) = file.file_size.filter(|s| *s > max) {
                return Err(MediaError::TooLarge { size, max });
            }
            let path = file
                .file_path
                .ok_or_else(|| MediaError::Fetch("Telegram gave no file path".into()))?;
            let mut url = tg.api_url.clone();
            push_segments(&mut url, &["file", &format!("bot{token}")]);
            push_segments(&mut url, &path.split('/').collect::<Vec<_>>());
            self.get(url.as_str(), &[]).await
        }
        .await;
        result.map_err(|e| redact(e, token))
    }

    /// GETs `url` through the guard under the cap: a `Content-Length` over it fails before
    /// the body is read, a body that grows past it fails at the chunk that does. A redirect may
    /// lead to `url`'s own host or to one of `redirect_hosts`.
    async fn get(
        &self,
        url: &str,
        redirect_hosts: &[HostRule],
    ) -> Result<(Vec<u8>, Option<String>), MediaError> {
        let body = self
            .inner
            .guard
            .fetch(url, &self.policy(redirect_hosts))
            .await
            .map_err(net_error)?;
        Ok((body.bytes, body.content_type))
    }

    fn policy(&self, redirect_hosts: &[HostRule]) -> Policy {
        Policy {
            max_bytes: self.inner.max_bytes,
            timeout: self.inner.timeout,
            redirect_hosts: redirect_hosts.to_vec(),
            bearer: None,
        }
    }
}

/// The Bot API's envelope around a `File`.
#[derive(Deserialize)]
struct BotAnswer {
    ok: bool,
    result: Option<TelegramFile>,
    description: Option<String>,
}

#[derive(Deserialize)]
struct TelegramFile {
    file_size: Option<u64>,
    file_path: Option<String>,
}

/// Appends path segments the way teloxide builds its URLs (each segment escaped).
fn push_segments(url: &mut url::Url, segments: &[&str]) {
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().extend(segments);
    }
}

/// The guard's error as the media layer's: a refusal stays one, the rest as before.
fn net_error(e: NetError) -> MediaError {
    match e {
        NetError::Refused(why) => MediaError::Refused(why.to_string()),
        NetError::TooLarge { size, max } => MediaError::TooLarge { size, max },
        NetError::Timeout => MediaError::Timeout,
        NetError::Status(_) | NetError::Failed(_) => MediaError::Fetch(e.to_string()),
    }
}

/// The token removed from an error's text, whatever put it there.
fn redact(e: MediaError, token: &str) -> MediaError {
    if token.is_empty() {
        return e;
    }
    match e {
        MediaError::Fetch(text) if text.contains(token) => {
            MediaError::Fetch(text.replace(token, "***"))
        }
        MediaError::Refused(text) if text.contains(token) => {
            MediaError::Refused(text.replace(token, "***"))
        }
        other => other,
    }
}

fn gone() -> MediaError {
    MediaError::Fetch("no longer available".into())
}

/// The metric label for where a file comes from.
fn platform(source: &MediaSource) -> &'static str {
    match source {
        MediaSource::Telegram(_) => "telegram",
        MediaSource::Url(_) => "url",
        MediaSource::DiscordSticker(_) => "discord_sticker",
        MediaSource::Cached(_) => "cache",
        MediaSource::Authorized { .. } => "platform_file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telegram_urls_are_built_as_teloxide_builds_them() {
        let mut url = url::Url::parse("https://example.com/telegram").unwrap();
        push_segments(&mut url, &["file", "bot1:abc"]);
        push_segments(
            &mut url,
            &"photos/file_1.jpg".split('/').collect::<Vec<_>>(),
        );
        assert_eq!(
            url.as_str(),
            "https://example.com/telegram/file/bot1:abc/photos/file_1.jpg"
        );
        let mut root = url::Url::parse("https://api.telegram.org").unwrap();
        push_segments(&mut root, &["bot1:abc", "getFile"]);
        assert_eq!(root.as_str(), "https://api.telegram.org/bot1:abc/getFile");
    }

    #[test]
    fn the_token_is_redacted_from_any_error_text() {
        let e = redact(
            MediaError::Fetch("GET /file/bot1:abc/x failed".into()),
            "1:abc",
        );
        assert_eq!(e, MediaError::Fetch("GET /file/bot***/x failed".into()));
        assert_eq!(redact(MediaError::Timeout, "1:abc"), MediaError::Timeout);
    }
}
