//! Files a platform serves only with its own token (Slack's `url_private`): the token and
//! the hosts each platform declares (`PlatformSpec::files`), and the fetch that shows the token
//! to those hosts alone.

use std::collections::HashMap;

use super::{net_error, redact, Fetcher};
use crate::config::Config;
use crate::domain::Platform;
use crate::media::MediaError;
use crate::net::{Bearer, HostRule, Policy};

/// Each platform's file token and hosts, for the platforms whose token is set.
pub(super) fn bearers(config: &Config) -> HashMap<Platform, Bearer> {
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
            Some((s.name, Bearer { token, hosts }))
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
        let bearer = self
            .inner
            .authorized
            .get(&platform)
            .ok_or(MediaError::NoSource("a platform without a file token"))?;
        let parsed = url::Url::parse(url).map_err(|_| MediaError::Refused("not a URL".into()))?;
        if !bearer.hosts.iter().any(|h| h.matches(&parsed)) {
            return Err(MediaError::Refused(format!(
                "not one of {platform}'s file hosts"
            )));
        }
        let policy = Policy {
            redirect_hosts: bearer.hosts.clone(),
            bearer: Some(bearer.clone()),
            ..self.policy(&[])
        };
        let result = match self.inner.guard.fetch(url, &policy).await {
            Ok(body) => Ok((body.bytes, body.content_type)),
            Err(e) => Err(net_error(e)),
        };
        result.map_err(|e| redact(e, &bearer.token))
    }
}
