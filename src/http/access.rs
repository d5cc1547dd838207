//! Who may call which route: the one access rule of the HTTP server.
//!
//! Every route is declared in [`super::table`] with a [`Guard`]; there is no other way to mount
//! one, so a new route cannot be added without choosing. `Open` routes hold no private data
//! (probes, the scrape, the two page shells whose scripts send the token). Everything else —
//! transcripts, the admin API, pairing approval, the chat — answers only:
//! - a request with the configured bearer token (`web.token`), when one is configured;
//! - with no token configured, a request from the loopback interface when loopback is trusted
//!   (`web.trust_loopback`, by default only when `server.listen` is itself loopback) and the
//!   request carries no reverse-proxy header. A proxy on the same host makes every client look
//!   local; its headers are the tell, and the operator's remedy is a token.
//!
//! A browser is a local client too, and any web page can make it send requests here. So local
//! trust also needs a `Host` that names the loopback (`localhost`, `127.0.0.1`, `[::1]`, any
//! port): a DNS-rebinding page reaches 127.0.0.1 under its own name, and its `Host` says so.
//! A state-changing request (anything but GET/HEAD/OPTIONS) must moreover not come from
//! another site: an `Origin` other than the request's own, or `Sec-Fetch-Site: cross-site` /
//! `same-site` (another port on localhost is another site's page), is refused.
//!
//! Config validation refuses a non-loopback listener without a token and an empty token, so
//! "no token" here always means "loopback only".

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use url::Host;

use super::inflight::InFlight;
use super::{ApiError, HttpState};
use crate::config::{Config, Secret};

/// How a route is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Anyone who can reach the listener: nothing private behind it.
    Open,
    /// The bearer token, or a trusted local caller when no token is configured.
    Api,
    /// One of the `[[api.keys]]` (the OpenAI-compatible API, `openai/keys.rs`); never the web
    /// token, never local trust.
    ApiKey,
    /// The hook's own secret (`[[hooks]]`: a signature over the body or its bearer token),
    /// checked by the handler in constant time; never the web token, never local trust.
    Signed,
}

/// The access rule, resolved once from the configuration at start.
#[derive(Clone)]
pub struct Access {
    token: Option<Secret>,
    trust_loopback: bool,
    /// Requests in flight with the token, and as the local operator (`web.max_concurrent_requests`).
    token_in_flight: InFlight,
    local_in_flight: InFlight,
}

/// What the middleware learned about an admitted request; handlers read it from the request
/// extensions (the web chat marks its events as local with it).
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    /// Admitted as the local operator (no token configured, trusted loopback, no proxy).
    pub trusted_local: bool,
}

/// Headers a reverse proxy or CDN adds; any of them means the peer address is not the client's.
pub const PROXY_HEADERS: [&str; 15] = [
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-forwarded-port",
    "x-forwarded-server",
    "x-original-forwarded-for",
    "x-real-ip",
    "x-client-ip",
    "x-cluster-client-ip",
    "cf-connecting-ip",
    "true-client-ip",
    "fastly-client-ip",
    "via",
    "client-ip",
];

impl Access {
    pub fn from_config(c: &Config) -> Access {
        let listen_loopback = c.server.listen.ip().is_loopback();
        Access {
            token: c.web.token.clone(),
            trust_loopback: c.web.trust_loopback.unwrap_or(listen_loopback),
            token_in_flight: InFlight::new(c.web.max_concurrent_requests),
            local_in_flight: InFlight::new(c.web.max_concurrent_requests),
        }
    }

    fn trusted_local(
        &self,
        method: &Method,
        peer: Option<SocketAddr>,
        headers: &HeaderMap,
    ) -> bool {
        self.trust_loopback
            && peer.is_some_and(|p| p.ip().is_loopback())
            && !PROXY_HEADERS.iter().any(|h| headers.contains_key(*h))
            && loopback_host(headers)
            && (method.is_safe() || !cross_site(headers))
    }

    /// `Ok(caller)` when the request may proceed, else the message for the 401.
    fn admit(
        &self,
        method: &Method,
        peer: Option<SocketAddr>,
        headers: &HeaderMap,
    ) -> Result<Caller, &'static str> {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match &self.token {
            Some(token) => match given {
                Some(g) if token.matches(g) => Ok(Caller {
                    trusted_local: false,
                }),
                _ => Err("missing or wrong bearer token: send Authorization: Bearer <web.token>"),
            },
            None if self.trusted_local(method, peer, headers) => Ok(Caller {
                trusted_local: true,
            }),
            None => Err(
                "this API answers only local requests when no web.token is set, and this one \
                 is not (another host, a proxy header, a Host that is not localhost, another \
                 site's page, or web.trust_loopback = false); configure web.token and send \
                 Authorization: Bearer <web.token>",
            ),
        }
    }
}

/// The middleware on every `Guard::Api` route.
pub(super) async fn require(
    State(state): State<HttpState>,
    mut req: Request,
    next: Next,
) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let caller = match state.access.admit(req.method(), peer, req.headers()) {
        Ok(caller) => caller,
        Err(message) => return ApiError::new(StatusCode::UNAUTHORIZED, message).into_response(),
    };
    let (limit, who) = match caller.trusted_local {
        true => (&state.access.local_in_flight, "local"),
        false => (&state.access.token_in_flight, "web_token"),
    };
    let Some(permit) = limit.try_enter(who) else {
        let mut res = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "{} requests of this caller are already in flight \
                 (web.max_concurrent_requests); try again when one is over",
                limit.max()
            ),
        )
        .into_response();
        res.headers_mut().insert(
            header::RETRY_AFTER,
            header::HeaderValue::from(super::inflight::RETRY_AFTER_SECS),
        );
        return res;
    };
    req.extensions_mut().insert(caller);
    super::inflight::hold(next.run(req).await, permit)
}

/// The `Host` names the loopback: `localhost` (or a name under `.localhost`, which resolves
/// only there), a 127/8 address or `[::1]`, any port. No `Host` at all is not local.
fn loopback_host(headers: &HeaderMap) -> bool {
    headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| url::Url::parse(&format!("http://{h}/")).ok())
        .is_some_and(|u| match u.host() {
            Some(Host::Domain(d)) => {
                let d = d.trim_end_matches('.');
                d == "localhost" || d.ends_with(".localhost")
            }
            Some(Host::Ipv4(ip)) => ip.is_loopback(),
            Some(Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        })
}

/// The browser says another page sent this: an `Origin` that is not this request's own
/// (scheme-less compare of host and port with the `Host` header; `null` included), or a
/// `Sec-Fetch-Site` other than same-origin / none (a typed URL, a bookmark).
fn cross_site(headers: &HeaderMap) -> bool {
    let text = |name| headers.get(name).map(|v| v.to_str().unwrap_or("\u{0}"));
    if let Some(site) = text(SEC_FETCH_SITE) {
        if !matches!(site, "same-origin" | "none") {
            return true;
        }
    }
    match text(header::ORIGIN.as_str()) {
        None => false,
        Some(origin) => {
            let own = text(header::HOST.as_str()).map(authority);
            let theirs = url::Url::parse(origin).ok().map(|u| {
                let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
                authority(&format!("{}{port}", u.host_str().unwrap_or_default()))
            });
            theirs.is_none() || theirs != own
        }
    }
}

/// A `Host`-style authority, lower-case, without a default port.
fn authority(a: &str) -> String {
    let a = a.to_ascii_lowercase();
    a.strip_suffix(":80").map(str::to_string).unwrap_or(a)
}

const SEC_FETCH_SITE: &str = "sec-fetch-site";

#[cfg(test)]
mod tests {
    use super::*;

    fn access(token: Option<&str>, trust: bool) -> Access {
        Access {
            token: token.map(|t| Secret::new(t.to_string())),
            trust_loopback: trust,
            token_in_flight: InFlight::new(1),
            local_in_flight: InFlight::new(1),
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            let name = header::HeaderName::from_bytes(k.as_bytes()).unwrap();
            h.insert(name, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_rule_table() {
        let local: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let remote: SocketAddr = "203.0.113.9:5000".parse().unwrap();
        let host = ("host", "127.0.0.1:8080");
        let bearer = |t: &str| format!("Bearer {t}");
        let (b_x, b_wrong, b_right, b_short) = (
            bearer("x"),
            bearer("wrong"),
            bearer("s3cret"),
            bearer("s3cre"),
        );
        let auth = |v: &str| headers(&[host, ("authorization", v)]);
        let plain = headers(&[host]);
        let proxied = headers(&[host, ("x-forwarded-for", "198.51.100.1")]);
        // (token, trust, peer, headers, admitted)
        let cases: [(Option<&str>, bool, SocketAddr, HeaderMap, bool); 11] = [
            (None, true, local, plain.clone(), true),
            (None, true, local, proxied, false),
            (None, false, local, plain.clone(), false),
            (None, true, remote, plain.clone(), false),
            (None, true, remote, auth(&b_x), false),
            (None, true, local, HeaderMap::new(), false),
            (Some("s3cret"), true, local, plain, false),
            (Some("s3cret"), true, local, auth(&b_wrong), false),
            (Some("s3cret"), true, local, auth(&b_right), true),
            (Some("s3cret"), false, remote, auth(&b_right), true),
            (Some("s3cret"), false, remote, auth(&b_short), false),
        ];
        for (token, trust, peer, h, want) in cases {
            let got = access(token, trust)
                .admit(&Method::POST, Some(peer), &h)
                .is_ok();
            assert_eq!(got, want, "token {token:?} trust {trust} peer {peer} {h:?}");
        }
        assert!(
            access(None, true)
                .admit(&Method::GET, None, &headers(&[host]))
                .is_err(),
            "no peer, no trust"
        );
    }

    /// DNS rebinding and cross-site pages: the Host must name the loopback, and a
    /// state-changing request must come from this origin.
    #[test]
    fn host_and_origin() {
        let local: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let a = access(None, true);
        // (method, headers, admitted)
        type Case = (Method, &'static [(&'static str, &'static str)], bool);
        let cases: &[Case] = &[
            (Method::GET, &[("host", "localhost:8080")], true),
            (Method::GET, &[("host", "LOCALHOST")], true),
            (Method::GET, &[("host", "app.localhost:8080")], true),
            (Method::GET, &[("host", "127.0.0.1")], true),
            (Method::GET, &[("host", "127.1.2.3:9")], true),
            (Method::GET, &[("host", "[::1]:8080")], true),
            (Method::GET, &[("host", "evil.attacker.example")], false),
            (
                Method::GET,
                &[("host", "evil.attacker.example:8080")],
                false,
            ),
            (
                Method::GET,
                &[("host", "localhost.attacker.example")],
                false,
            ),
            (Method::GET, &[("host", "127.0.0.1.nip.io")], false),
            (Method::GET, &[("host", "10.0.0.1:8080")], false),
            (Method::GET, &[], false),
            (
                Method::POST,
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://127.0.0.1:8080"),
                    ("sec-fetch-site", "same-origin"),
                ],
                true,
            ),
            (Method::POST, &[("host", "127.0.0.1:8080")], true),
            (
                Method::POST,
                &[("host", "localhost"), ("origin", "http://localhost:80")],
                true,
            ),
            (
                Method::POST,
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://evil.attacker.example"),
                ],
                false,
            ),
            (
                Method::POST,
                &[
                    ("host", "127.0.0.1:8080"),
                    ("origin", "http://127.0.0.1:3000"),
                ],
                false,
            ),
            (
                Method::POST,
                &[("host", "127.0.0.1:8080"), ("origin", "null")],
                false,
            ),
            (
                Method::POST,
                &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")],
                false,
            ),
            (
                Method::DELETE,
                &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "same-site")],
                false,
            ),
            // A read from another page cannot see the answer (no CORS): not refused here.
            (
                Method::GET,
                &[("host", "127.0.0.1:8080"), ("sec-fetch-site", "cross-site")],
                true,
            ),
        ];
        for (method, pairs, want) in cases {
            let got = a.admit(method, Some(local), &headers(pairs)).is_ok();
            assert_eq!(got, *want, "{method} {pairs:?}");
        }
    }

    #[test]
    fn every_forwarding_header_means_a_proxy() {
        let local: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        for h in PROXY_HEADERS {
            let got = access(None, true)
                .admit(
                    &Method::GET,
                    Some(local),
                    &headers(&[("host", "127.0.0.1:8080"), (h, "203.0.113.7")]),
                )
                .is_ok();
            assert!(!got, "{h} was trusted as local");
        }
    }
}
