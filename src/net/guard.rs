//! The guarded client itself: two reqwest clients that never follow a redirect, send no
//! `Referer` and use no proxy — one resolving through `PublicOnly` for every host, one with the
//! system resolver for the hosts the operator exempted — and the hop loop that checks each
//! URL before a byte goes to it.
//!
//! Must not: let reqwest follow a redirect (it would skip the checks); let a URL reach an
//! error text (`without_url`); read a body past the cap or past the deadline.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, LOCATION};
use tokio::time::Instant;
use url::Url;

use super::addr::classify;
use super::resolve::{self, PublicOnly};
use super::{HostRule, NetError, Policy, Refusal, MAX_REDIRECTS};

/// Fetches untrusted URLs; cheap to clone. The clients are built at the first fetch.
#[derive(Clone)]
pub struct Guard {
    inner: Arc<Inner>,
}

struct Inner {
    /// Hosts reached with the system resolver and without the address check.
    exempt: Vec<HostRule>,
    connect_timeout: Duration,
    public: OnceLock<reqwest::Client>,
    trusted: OnceLock<reqwest::Client>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("exempt", &self.inner.exempt)
            .finish_non_exhaustive()
    }
}

/// A response whose status and headers are in, its body not yet read.
pub struct Opened {
    response: reqwest::Response,
    max: u64,
    deadline: Instant,
    read: u64,
}

/// A whole body and its announced type.
#[derive(Debug, Clone)]
pub struct Body {
    pub bytes: Vec<u8>,
    pub content_type: Option<String>,
}

impl Guard {
    /// A guard that reaches the `exempt` hosts even on private addresses (the platform APIs
    /// the operator configured, the allow list) and only public addresses otherwise.
    pub fn new(exempt: Vec<HostRule>, connect_timeout: Duration) -> Guard {
        Guard {
            inner: Arc::new(Inner {
                exempt,
                connect_timeout,
                public: OnceLock::new(),
                trusted: OnceLock::new(),
            }),
        }
    }

    /// GETs `url` and reads its whole body: any final status but a success is an error.
    pub async fn fetch(&self, url: &str, policy: &Policy) -> Result<Body, NetError> {
        let opened = self.open(url, policy).await?;
        let status = opened.status();
        if !(200..300).contains(&status) {
            return Err(NetError::Status(status));
        }
        opened.body().await
    }

    /// GETs `url`, following the redirects the policy allows, up to the final answer's
    /// headers. Its body is read under the same cap and deadline.
    pub async fn open(&self, url: &str, policy: &Policy) -> Result<Opened, NetError> {
        let deadline = Instant::now() + policy.timeout;
        let response = tokio::time::timeout_at(deadline, self.follow(url, policy))
            .await
            .map_err(|_| NetError::Timeout)??;
        let max = policy.max_bytes;
        if let Some(size) = response.content_length().filter(|s| *s > max) {
            return Err(NetError::TooLarge { size, max });
        }
        Ok(Opened {
            response,
            max,
            deadline,
            read: 0,
        })
    }

    async fn follow(&self, url: &str, policy: &Policy) -> Result<reqwest::Response, NetError> {
        let first = Url::parse(url).map_err(|_| Refusal::NotAUrl)?;
        check_scheme(&first)?;
        let mut current = first.clone();
        let mut redirects = 0;
        loop {
            let client = self.client_for(&current)?;
            let mut request = client.get(current.clone());
            if let Some(b) = policy
                .bearer
                .as_ref()
                .filter(|b| b.hosts.iter().any(|h| h.matches(&current)))
            {
                request = request.bearer_auth(&b.token);
            }
            let response = request.send().await.map_err(transport)?;
            let location = response
                .status()
                .is_redirection()
                .then(|| response.headers().get(LOCATION))
                .flatten();
            let Some(location) = location else {
                return Ok(response);
            };
            if redirects == MAX_REDIRECTS {
                return Err(Refusal::TooManyRedirects.into());
            }
            redirects += 1;
            let next = location
                .to_str()
                .ok()
                .and_then(|l| current.join(l).ok())
                .ok_or(Refusal::NotAUrl)?;
            check_scheme(&next)?;
            if current.scheme() == "https" && next.scheme() == "http" {
                return Err(Refusal::Downgrade.into());
            }
            let allowed = policy.follow_anywhere
                || same_host(&first, &next)
                || policy.redirect_hosts.iter().any(|h| h.matches(&next));
            if !allowed {
                return Err(Refusal::OtherHost.into());
            }
            current = next;
        }
    }

    /// The client for one hop: the trusted one for an exempt host, else the public one, after
    /// checking an IP literal (the connector resolves only names).
    fn client_for(&self, url: &Url) -> Result<&reqwest::Client, NetError> {
        if self.inner.exempt.iter().any(|h| h.matches(url)) {
            return self.client(&self.inner.trusted, false);
        }
        let literal = match url.host() {
            Some(url::Host::Ipv4(ip)) => Some(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(IpAddr::V6(ip)),
            _ => None,
        };
        if let Some(ip) = literal {
            classify(ip).map_err(Refusal::Address)?;
        }
        self.client(&self.inner.public, true)
    }

    fn client<'a>(
        &self,
        cell: &'a OnceLock<reqwest::Client>,
        public_only: bool,
    ) -> Result<&'a reqwest::Client, NetError> {
        if let Some(c) = cell.get() {
            return Ok(c);
        }
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .referer(false)
            .no_proxy()
            .connect_timeout(self.inner.connect_timeout);
        if public_only {
            builder = builder.dns_resolver(Arc::new(PublicOnly));
        }
        let client = builder
            .build()
            .map_err(|e| NetError::Failed(format!("no HTTP client: {}", e.without_url())))?;
        Ok(cell.get_or_init(|| client))
    }
}

impl Opened {
    pub fn status(&self) -> u16 {
        self.response.status().as_u16()
    }

    /// The length the server announced, if any.
    pub fn content_length(&self) -> Option<u64> {
        self.response.content_length()
    }

    pub fn content_type(&self) -> Option<String> {
        self.response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }

    /// The next piece of the body (`None` at its end): past the cap is `TooLarge` at the
    /// chunk that crosses it, past the deadline `Timeout`.
    pub async fn chunk(&mut self) -> Result<Option<bytes::Bytes>, NetError> {
        let chunk = tokio::time::timeout_at(self.deadline, self.response.chunk())
            .await
            .map_err(|_| NetError::Timeout)?
            .map_err(transport)?;
        if let Some(c) = &chunk {
            self.read += c.len() as u64;
            if self.read > self.max {
                return Err(NetError::TooLarge {
                    size: self.read,
                    max: self.max,
                });
            }
        }
        Ok(chunk)
    }

    /// The whole body, under the cap and the deadline.
    pub async fn body(mut self) -> Result<Body, NetError> {
        let content_type = self.content_type();
        let announced = self.response.content_length().unwrap_or(0);
        let mut bytes = Vec::with_capacity(announced.min(self.max) as usize);
        while let Some(chunk) = self.chunk().await? {
            bytes.extend_from_slice(&chunk);
        }
        Ok(Body {
            bytes,
            content_type,
        })
    }
}

fn check_scheme(url: &Url) -> Result<(), Refusal> {
    match url.scheme() {
        "http" | "https" => Ok(()),
        other => Err(Refusal::Scheme(other.to_string())),
    }
}

/// Whether a redirect stays on the host asked for: the same host and port, or the same host
/// moved from http to https on the default ports.
fn same_host(first: &Url, next: &Url) -> bool {
    let upgrade = first.scheme() == "http"
        && next.scheme() == "https"
        && first.port().is_none()
        && next.port().is_none();
    first.host_str() == next.host_str()
        && (first.port_or_known_default() == next.port_or_known_default() || upgrade)
}

/// A reqwest error as text, its URL removed, with its causes; a refusal from the resolver
/// stays a refusal.
fn transport(e: reqwest::Error) -> NetError {
    if e.is_timeout() {
        return NetError::Timeout;
    }
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        if let Some(resolve::Refused(why)) = s.downcast_ref::<resolve::Refused>() {
            return Refusal::Address(*why).into();
        }
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    NetError::Failed(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_stay_on_the_host_asked_for() {
        let url = |s: &str| Url::parse(s).unwrap();
        let cases = [
            ("http://h.example/a", "http://h.example/b", true),
            ("http://h.example/a", "https://h.example/b", true),
            ("http://h.example:8080/a", "http://h.example:8080/b", true),
            ("http://h.example:8080/a", "http://h.example:8081/b", false),
            ("http://h.example:8080/a", "https://h.example/b", false),
            ("https://h.example/a", "https://other.example/b", false),
            ("http://127.0.0.1:80/a", "http://127.0.0.1/b", true),
            ("http://127.0.0.1:5000/a", "http://localhost:5000/b", false),
        ];
        for (first, next, want) in cases {
            assert_eq!(
                same_host(&url(first), &url(next)),
                want,
                "{first} -> {next}"
            );
        }
    }
}
