//! One guarded HTTP client for URLs Herald did not choose: files a person sent (Telegram and
//! Discord media today), pages and files the agent's tools and new platforms fetch next.
//! A stranger controls such a URL, or the server behind it, so whatever it names, Herald must
//! not become a probe of the network it runs in.
//!
//! The rules, for every hop: http(s) only; an address on the public internet only (`addr.rs`),
//! checked after DNS resolution and connected to as checked (`resolve.rs`), unless the host is
//! one the operator exempted (a configured platform API, `media.allow_private_hosts`); a
//! redirect followed only to the host asked for or one of the caller's file hosts, never from
//! https to http, at most [`MAX_REDIRECTS`]; no `Referer`, no proxy; the body under a byte cap
//! and the whole fetch under a deadline.
//!
//! Must not: put a URL (which may carry a token in its path) into an error text; follow a
//! redirect without checking it again; resolve a name twice for one connection.

mod addr;
mod guard;
mod resolve;

pub use addr::{classify, Blocked};
pub use guard::{Body, Guard, Opened};

use std::time::Duration;

/// Redirects followed at most in one fetch.
pub const MAX_REDIRECTS: usize = 5;

/// What one fetch may do besides the guard's fixed rules.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Bytes of body read at most; an announced length over it fails before the body.
    pub max_bytes: u64,
    /// The whole fetch — every hop and the body — ends by then.
    pub timeout: Duration,
    /// Hosts a redirect may lead to besides the one asked for: the platform's own file hosts.
    pub redirect_hosts: Vec<HostRule>,
    /// A redirect may lead to any host (the `web_fetch` tool: a page moved elsewhere); each
    /// hop is still checked like the first (scheme, address, no https to http).
    pub follow_anywhere: bool,
    /// A platform token sent as `Authorization: Bearer` to these hosts only (a Slack file on
    /// `files.slack.com`); a hop to any other host goes without it.
    pub bearer: Option<Bearer>,
}

/// A token and the hosts it may be shown to.
#[derive(Clone)]
pub struct Bearer {
    pub token: String,
    pub hosts: Vec<HostRule>,
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bearer")
            .field("token", &"***")
            .field("hosts", &self.hosts)
            .finish()
    }
}

/// A host, with a port or for every port: `files.example.com`, `127.0.0.1:8081`, `[::1]:9`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// As the `url` crate writes a host: a lowercase name, an IPv4 address or a bracketed
    /// IPv6 one.
    host: String,
    port: Option<u16>,
}

impl HostRule {
    /// `host` or `host:port` as an operator writes it; `None` when it is not one.
    pub fn parse(text: &str) -> Option<HostRule> {
        let text = text.trim();
        if text.is_empty() || text.contains(['/', '@', '?', '#']) {
            return None;
        }
        let url = url::Url::parse(&format!("http://{text}/")).ok()?;
        Some(HostRule {
            host: url.host_str()?.to_string(),
            port: url.port(),
        })
    }

    /// The host and port `url` reaches (the scheme's port when none is written).
    pub fn of_url(url: &url::Url) -> Option<HostRule> {
        Some(HostRule {
            host: url.host_str()?.to_string(),
            port: Some(url.port_or_known_default()?),
        })
    }

    /// Whether `url` goes to this host (and port, when the rule has one).
    pub fn matches(&self, url: &url::Url) -> bool {
        url.host_str() == Some(self.host.as_str())
            && self
                .port
                .is_none_or(|p| url.port_or_known_default() == Some(p))
    }
}

impl std::fmt::Display for HostRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}:{p}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

/// Why a fetch did not give its body. No variant carries a URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// A rule of the guard stopped it before any byte went to the place named.
    #[error("{0}")]
    Refused(Refusal),
    #[error("{size} bytes, over the {max} limit")]
    TooLarge { size: u64, max: u64 },
    #[error("it did not finish in time")]
    Timeout,
    /// The final answer was not a success.
    #[error("HTTP {0}")]
    Status(u16),
    /// The connection or the transfer failed (the transport's own words, without the URL).
    #[error("{0}")]
    Failed(String),
}

/// Which rule refused a fetch, in words a person can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the address is not a URL")]
    NotAUrl,
    #[error("{0} addresses are not fetched")]
    Scheme(String),
    #[error("its server redirected it to another host, which is not followed")]
    OtherHost,
    #[error("its server redirected it from https to http, which is not followed")]
    Downgrade,
    #[error("its server redirected it more than {MAX_REDIRECTS} times")]
    TooManyRedirects,
    #[error("its address is {0}, which Herald does not reach")]
    Address(Blocked),
}

impl From<Refusal> for NetError {
    fn from(r: Refusal) -> NetError {
        NetError::Refused(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_rules_parse_and_match() {
        let url = |s: &str| url::Url::parse(s).unwrap();
        let cases: &[(&str, &str, bool)] = &[
            ("files.example.com", "https://files.example.com/a", true),
            ("files.example.com", "http://files.example.com:8080/a", true),
            ("Files.Example.com", "https://files.example.com/a", true),
            ("files.example.com:443", "https://files.example.com/a", true),
            ("files.example.com:443", "http://files.example.com/a", false),
            ("files.example.com", "https://example.com/a", false),
            (
                "files.example.com",
                "https://evil.files.example.com/a",
                false,
            ),
            ("127.0.0.1:8081", "http://127.0.0.1:8081/x", true),
            ("127.0.0.1:8081", "http://127.0.0.1:8082/x", false),
            ("[::1]:9", "http://[::1]:9/", true),
            ("10.0.0.5", "http://10.0.0.5:9000/", true),
        ];
        for (rule, target, want) in cases {
            let r = HostRule::parse(rule).unwrap_or_else(|| panic!("{rule} parses"));
            assert_eq!(r.matches(&url(target)), *want, "{rule} vs {target}");
        }
        for bad in ["", " ", "http://x", "x/y", "user@x", "x:port", "x:99999"] {
            assert_eq!(HostRule::parse(bad), None, "{bad:?}");
        }
        let of = HostRule::of_url(&url("https://cdn.example.com/f")).unwrap();
        assert_eq!(of.to_string(), "cdn.example.com:443");
    }
}
