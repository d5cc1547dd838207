//! Files a platform serves only with its own token (Slack's `url_private`, WhatsApp's media
//! ids): the token and the hosts each platform declares (`PlatformSpec::files`), and the fetch
//! that shows the token to those hosts alone.
//!
//! A platform whose file URL names the download instead of serving it (`FileAuth::link`:
//! WhatsApp's `GET /{media-id}` answers `{"url": …}`) takes two requests, both with the token,
//! both only to its hosts; the first answer is read under a small cap.

use std::collections::HashMap;

use super::{net_error, redact, Fetcher};
use crate::config::Config;
use crate::domain::Platform;
use crate::media::MediaError;
use crate::net::{Bearer, HostRule, Policy};

/// How much of a link answer (a small JSON object) is read.
const LINK_MAX_BYTES: u64 = 64 * 1024;

/// One platform's file token and hosts, and the field naming the download when its file URL
/// answers with a link.
pub(super) struct PlatformFiles {
    pub bearer: Bearer,
    pub link: Option<&'static str>,
}

/// Each platform's file token and hosts, for the platforms whose token is set.
pub(super) fn bearers(config: &Config) -> HashMap<Platform, PlatformFiles> {
    crate::config::specs()
        .iter()
        .filter_map(|s| {
            let files = s.files.as_ref()?;
            let token = (files.token)(config)?;
            let hosts = (files.hosts)(config)
                .iter()
                .filter_map(|h| HostRule::parse(h))
                .collect();
            let token = token.expose().to_string();
            let bearer = Bearer { token, hosts };
            Some((
                s.name,
                PlatformFiles {
                    bearer,
                    link: files.link,
                },
            ))
        })
        .collect()
}

impl Fetcher {
    /// A platform file behind its token: only on the platform's file hosts (a URL elsewhere is
    /// refused before any request), the token sent to those hosts alone and redacted from
    /// every error.
    pub(super) async fn authorized(
        &self,
        platform: Platform,
        url: &str,
    ) -> Result<(Vec<u8>, Option<String>), MediaError> {
        let files = self
            .inner
            .authorized
            .get(&platform)
            .ok_or(MediaError::NoSource("a platform without a file token"))?;
        let bearer = &files.bearer;
        let result = async {
            let mut url = url.to_string();
            if let Some(field) = files.link {
                let (answer, _) = self
                    .with_token(platform, bearer, &url, LINK_MAX_BYTES)
                    .await?;
                url = serde_json::from_slice::<serde_json::Value>(&answer)
                    .ok()
                    .and_then(|v| v.get(field)?.as_str().map(str::to_string))
                    .ok_or_else(|| {
                        MediaError::Refused(format!("{platform} did not name the file's download"))
                    })?;
            }
            self.with_token(platform, bearer, &url, self.inner.max_bytes)
                .await
        }
        .await;
        result.map_err(|e| redact(e, &bearer.token))
    }

    /// One GET of `url` with the token, on the platform's hosts only.
    async fn with_token(
        &self,
        platform: Platform,
        bearer: &Bearer,
        url: &str,
        max_bytes: u64,
    ) -> Result<(Vec<u8>, Option<String>), MediaError> {
        let parsed = url::Url::parse(url).map_err(|_| MediaError::Refused("not a URL".into()))?;
        if !bearer.hosts.iter().any(|h| h.matches(&parsed)) {
            return Err(MediaError::Refused(format!(
                "not one of {platform}'s file hosts"
            )));
        }
        let policy = Policy {
            redirect_hosts: bearer.hosts.clone(),
            bearer: Some(bearer.clone()),
            max_bytes,
            ..self.policy(&[])
        };
        match self.inner.guard.fetch(url, &policy).await {
            Ok(body) => Ok((body.bytes, body.content_type)),
            Err(e) => Err(net_error(e)),
        }
    }
}
