//! The guard of the OpenAI-compatible routes: `Authorization: Bearer <key>` must be one of
//! the `[[api.keys]]`. Each key is compared in constant time (`subtle`) against a digest of
//! every configured key, so neither the match nor the length leaks through timing. `web.token`
//! is not a key here, and a key opens no other route (those answer to `access.rs`). Each key
//! has its own budget of requests in flight (`api.max_concurrent_per_key`, `inflight.rs`):
//! past it, 429 `rate_limit_exceeded` with `Retry-After`, before the body is read.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::OaiError;
use crate::config::ApiKey;
use crate::http::inflight::{hold, InFlight, RETRY_AFTER_SECS};
use crate::http::HttpState;

/// The configured keys, read once at start (`key_env` included), each with its digest and
/// its budget of requests in flight.
#[derive(Clone, Default)]
pub struct ApiKeys(Arc<Vec<(KeyCaller, [u8; 32], InFlight)>>);

/// Who an admitted request acts for; handlers read it from the request extensions.
#[derive(Debug, Clone)]
pub struct KeyCaller {
    /// The key's name: its conversations are the lanes `api:<name>:…`.
    pub name: String,
    /// The `[[people]]` person it acts as.
    pub person: String,
}

impl ApiKeys {
    pub fn new(keys: Vec<ApiKey>, max_in_flight: usize) -> ApiKeys {
        ApiKeys(Arc::new(
            keys.into_iter()
                .map(|k| {
                    let digest = Sha256::digest(k.key.expose().as_bytes()).into();
                    let caller = KeyCaller {
                        name: k.name,
                        person: k.person,
                    };
                    (caller, digest, InFlight::new(max_in_flight))
                })
                .collect(),
        ))
    }

    /// The key's caller and budget; every configured key is compared, whichever matches.
    fn admit(&self, given: &str) -> Option<(KeyCaller, InFlight)> {
        let digest: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        let mut found = None;
        for (caller, d, limit) in self.0.iter() {
            if bool::from(d.ct_eq(&digest)) {
                found = Some((caller.clone(), limit.clone()));
            }
        }
        found
    }
}

/// The middleware on every `Guard::ApiKey` route.
pub(crate) async fn require(
    State(state): State<HttpState>,
    mut req: Request,
    next: Next,
) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let Some((caller, limit)) = given.and_then(|g| state.api_keys.admit(g)) else {
        return OaiError::unauthorized(
            "missing or unknown API key: send Authorization: Bearer <one of [[api.keys]]>",
        )
        .into_response();
    };
    let Some(permit) = limit.try_enter("api_key") else {
        return OaiError::rate_limited(
            format!(
                "{} requests of this key are already in flight (api.max_concurrent_per_key); \
                 try again when one is over",
                limit.max()
            ),
            Duration::from_secs(RETRY_AFTER_SECS),
        )
        .into_response();
    };
    req.extensions_mut().insert(caller);
    hold(next.run(req).await, permit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    #[test]
    fn only_a_configured_key_is_admitted() {
        let key = |name: &str, value: &str| ApiKey {
            name: name.into(),
            person: "ana".into(),
            key: Secret::new(value),
        };
        let keys = ApiKeys::new(
            vec![
                key("laptop", "k-laptop-0123456789"),
                key("phone", "k-phone-0123456789"),
            ],
            4,
        );
        let cases = [
            ("k-laptop-0123456789", Some("laptop")),
            ("k-phone-0123456789", Some("phone")),
            ("k-phone-012345678", None),
            ("k-phone-0123456789x", None),
            ("", None),
        ];
        for (given, want) in cases {
            let got = keys.admit(given).map(|(c, _)| c.name);
            assert_eq!(got.as_deref(), want, "{given}");
        }
    }
}
