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
//! Config validation refuses a non-loopback listener without a token and an empty token, so
//! "no token" here always means "loopback only".

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::{api_error, HttpState};
use crate::config::{Config, Secret};

/// How a route is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Anyone who can reach the listener: nothing private behind it.
    Open,
    /// The bearer token, or a trusted local caller when no token is configured.
    Api,
}

/// The access rule, resolved once from the configuration at start.
#[derive(Clone)]
pub struct Access {
    token: Option<Secret>,
    trust_loopback: bool,
}

/// What the middleware learned about an admitted request; handlers read it from the request
/// extensions (the web chat marks its events as local with it).
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    /// Admitted as the local operator (no token configured, trusted loopback, no proxy).
    pub trusted_local: bool,
}

/// Headers a reverse proxy adds; any of them means the peer address is not the client's.
const PROXY_HEADERS: [&str; 5] = [
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
];

impl Access {
    pub fn from_config(c: &Config) -> Access {
        let listen_loopback = c
            .server
            .listen
            .parse::<SocketAddr>()
            .is_ok_and(|a| a.ip().is_loopback());
        Access {
            token: c.web.token.clone(),
            trust_loopback: c.web.trust_loopback.unwrap_or(listen_loopback),
        }
    }

    fn trusted_local(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> bool {
        self.trust_loopback
            && peer.is_some_and(|p| p.ip().is_loopback())
            && !PROXY_HEADERS.iter().any(|h| headers.contains_key(*h))
    }

    /// `Ok(caller)` when the request may proceed, else the message for the 401.
    fn admit(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> Result<Caller, &'static str> {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match &self.token {
            Some(token) => match given {
                Some(g) if constant_time_eq(g.as_bytes(), token.expose().as_bytes()) => {
                    Ok(Caller {
                        trusted_local: false,
                    })
                }
                _ => Err("missing or wrong bearer token: send Authorization: Bearer <web.token>"),
            },
            None if self.trusted_local(peer, headers) => Ok(Caller {
                trusted_local: true,
            }),
            None => Err(
                "this API answers only local requests when no web.token is set, and this one \
                 is not (another host, a proxy header, or web.trust_loopback = false); \
                 configure web.token and send Authorization: Bearer <web.token>",
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
    match state.access.admit(peer, req.headers()) {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(message) => api_error(StatusCode::UNAUTHORIZED, message),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(token: Option<&str>, trust: bool) -> Access {
        Access {
            token: token.map(|t| Secret::new(t.to_string())),
            trust_loopback: trust,
        }
    }

    #[test]
    fn the_rule_table() {
        let local: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let remote: SocketAddr = "203.0.113.9:5000".parse().unwrap();
        let bearer = |t: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                header::AUTHORIZATION,
                format!("Bearer {t}").parse().unwrap(),
            );
            h
        };
        let proxied = {
            let mut h = HeaderMap::new();
            h.insert("x-forwarded-for", "198.51.100.1".parse().unwrap());
            h
        };
        let none = HeaderMap::new();
        // (token, trust, peer, headers, admitted)
        let cases: [(Option<&str>, bool, SocketAddr, &HeaderMap, bool); 10] = [
            (None, true, local, &none, true),
            (None, true, local, &proxied, false),
            (None, false, local, &none, false),
            (None, true, remote, &none, false),
            (None, true, remote, &bearer("x"), false),
            (Some("s3cret"), true, local, &none, false),
            (Some("s3cret"), true, local, &bearer("wrong"), false),
            (Some("s3cret"), true, local, &bearer("s3cret"), true),
            (Some("s3cret"), false, remote, &bearer("s3cret"), true),
            (Some("s3cret"), false, remote, &bearer("s3cre"), false),
        ];
        for (token, trust, peer, headers, want) in cases {
            let got = access(token, trust).admit(Some(peer), headers).is_ok();
            assert_eq!(
                got, want,
                "token {token:?} trust {trust} peer {peer} {headers:?}"
            );
        }
        assert!(
            access(None, true).admit(None, &none).is_err(),
            "no peer, no trust"
        );
    }
}
