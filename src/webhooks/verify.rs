//! A delivery's proof that it comes from whoever holds the hook's secret: GitHub's
//! `X-Hub-Signature-256`, a generic `X-Signature-256` (both HMAC-SHA256 over the raw body),
//! or an `Authorization: Bearer` token. Every comparison is constant time (`hmac`'s
//! `verify_slice`, `config::same_secret`).
//!
//! Must not: put the body, the header's value or the secret into an error; the reason is a
//! fixed word the log and the 401 may carry.

use axum::http::HeaderMap;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::config::{same_secret, Secret, SignatureKind};

/// Why a delivery was refused with 401.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Missing,
    Malformed,
    Mismatch,
}

impl Refused {
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Missing => "missing signature",
            Refused::Malformed => "malformed signature",
            Refused::Mismatch => "signature does not match",
        }
    }
}

/// Checks `body` as `kind` demands against `secret`.
pub fn check(
    kind: SignatureKind,
    secret: &Secret,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), Refused> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match kind {
        SignatureKind::Github => {
            let sig = header("x-hub-signature-256").ok_or(Refused::Missing)?;
            let hex_sig = sig
                .trim()
                .strip_prefix("sha256=")
                .ok_or(Refused::Malformed)?;
            hmac_matches(secret, hex_sig, body)
        }
        SignatureKind::HmacSha256 => {
            let sig = header("x-signature-256").ok_or(Refused::Missing)?.trim();
            hmac_matches(secret, sig.strip_prefix("sha256=").unwrap_or(sig), body)
        }
        SignatureKind::Bearer => {
            let auth = header("authorization").ok_or(Refused::Missing)?;
            let (scheme, token) = auth.trim().split_once(' ').ok_or(Refused::Malformed)?;
            if !scheme.eq_ignore_ascii_case("bearer") {
                return Err(Refused::Malformed);
            }
            match same_secret(token.trim().as_bytes(), secret.expose().as_bytes()) {
                true => Ok(()),
                false => Err(Refused::Mismatch),
            }
        }
    }
}

fn hmac_matches(secret: &Secret, hex_sig: &str, body: &[u8]) -> Result<(), Refused> {
    let given = hex::decode(hex_sig.trim()).map_err(|_| Refused::Malformed)?;
    if given.len() != 32 {
        return Err(Refused::Malformed);
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes())
        .map_err(|_| Refused::Mismatch)?;
    mac.update(body);
    mac.verify_slice(&given).map_err(|_| Refused::Mismatch)
}

/// The hex HMAC-SHA256 of `body` under `secret`, as senders compute it (`herald hooks test`
/// prints it; tests sign with it).
pub fn hmac_hex(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn each_kind_accepts_its_proof_and_nothing_else() {
        let secret = Secret::new("0123456789abcdef-secret");
        let body = br#"{"a":1}"#;
        let sig = hmac_hex(secret.expose(), body);
        let gh = headers(&[("x-hub-signature-256", format!("sha256={sig}"))]);
        assert_eq!(check(SignatureKind::Github, &secret, &gh, body), Ok(()));
        assert_eq!(
            check(SignatureKind::Github, &secret, &gh, b"{\"a\":2}"),
            Err(Refused::Mismatch)
        );
        let bare = headers(&[("x-hub-signature-256", sig.clone())]);
        assert_eq!(
            check(SignatureKind::Github, &secret, &bare, body),
            Err(Refused::Malformed)
        );
        let generic = headers(&[("x-signature-256", sig.clone())]);
        assert_eq!(
            check(SignatureKind::HmacSha256, &secret, &generic, body),
            Ok(())
        );
        assert_eq!(
            check(SignatureKind::HmacSha256, &secret, &gh, body),
            Err(Refused::Missing)
        );
        let bearer = headers(&[("authorization", format!("Bearer {}", secret.expose()))]);
        assert_eq!(check(SignatureKind::Bearer, &secret, &bearer, body), Ok(()));
        let wrong = headers(&[("authorization", "Bearer nope".into())]);
        assert_eq!(
            check(SignatureKind::Bearer, &secret, &wrong, body),
            Err(Refused::Mismatch)
        );
        assert_eq!(
            check(SignatureKind::Bearer, &secret, &HeaderMap::new(), body),
            Err(Refused::Missing)
        );
    }
}
