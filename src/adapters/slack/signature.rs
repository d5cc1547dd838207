//! The Events API's request signature (Slack's "v0" scheme): `X-Slack-Signature` is
//! `v0=` hex(HMAC-SHA256(signing secret, `v0:<timestamp>:<raw body>`)) and
//! `X-Slack-Request-Timestamp` must be within five minutes of now (a replayed old request is
//! refused even with a good signature).
//!
//! The HMAC and its constant-time comparison are slack-morphism's verifier; the timestamp
//! window is checked here too, against the clock the caller passes, so tests need no sleeping.
//!
//! Must not: put the body, the signature or the secret into an error (the 401 is logged with
//! the reason only).

use slack_morphism::signature_verifier::{
    SlackEventSignatureVerifier, SlackEventSignatureVerifierError,
};
use slack_morphism::SlackSigningSecret;

/// How far a request's timestamp may be from now, either way.
pub const MAX_SKEW_SECS: i64 = 5 * 60;

pub const SIGNATURE_HEADER: &str = "x-slack-signature";
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";

/// Why a request was refused (the log's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("missing signature headers")]
    Missing,
    #[error("timestamp outside the five-minute window")]
    Stale,
    #[error("signature does not match")]
    BadSignature,
}

impl Refused {
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Missing => "missing",
            Refused::Stale => "stale",
            Refused::BadSignature => "bad_signature",
        }
    }
}

/// Checks one request: its headers' timestamp and signature over the raw body.
pub fn check(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now_secs: i64,
) -> Result<(), Refused> {
    let (Some(ts), Some(sig)) = (timestamp, signature) else {
        return Err(Refused::Missing);
    };
    let at: i64 = ts.trim().parse().map_err(|_| Refused::Stale)?;
    if (now_secs - at).abs() > MAX_SKEW_SECS {
        return Err(Refused::Stale);
    }
    // Slack signs the bytes it sent; a body that is not UTF-8 was not sent by Slack.
    let body = std::str::from_utf8(body).map_err(|_| Refused::BadSignature)?;
    let verifier = SlackEventSignatureVerifier::new(&SlackSigningSecret::new(secret.to_string()));
    verifier.verify(sig, body, ts).map_err(|e| match e {
        SlackEventSignatureVerifierError::IncorrectOrExpiredTimestampError(_) => Refused::Stale,
        _ => Refused::BadSignature,
    })
}

/// The signature Slack would send for `body` at `ts`, computed apart from the verifier.
#[cfg(test)]
pub fn sign(secret: &str, ts: &str, body: &str) -> String {
    use hmac_sha256::mac;
    format!("v0={}", hex::encode(mac(secret.as_bytes(), ts, body)))
}

/// HMAC-SHA256 over `v0:<ts>:<body>` with the sha2 already in the tree (RFC 2104).
#[cfg(test)]
mod hmac_sha256 {
    use sha2::{Digest, Sha256};

    pub fn mac(key: &[u8], ts: &str, body: &str) -> [u8; 32] {
        let mut block = [0u8; 64];
        if key.len() > 64 {
            block[..32].copy_from_slice(&Sha256::digest(key));
        } else {
            block[..key.len()].copy_from_slice(key);
        }
        let pad = |x: u8| block.map(|b| b ^ x);
        let mut inner = Sha256::new();
        inner.update(pad(0x36));
        inner.update(format!("v0:{ts}:").as_bytes());
        inner.update(body.as_bytes());
        let mut outer = Sha256::new();
        outer.update(pad(0x5c));
        outer.update(inner.finalize());
        outer.finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

    fn now() -> i64 {
        chrono::Utc::now().timestamp()
    }

    #[test]
    fn slack_documented_example_verifies() {
        // The worked example of Slack's "Verifying requests" page (timestamp 1531420618).
        let body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let want = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign(SECRET, "1531420618", body), want);
        assert_eq!(
            check(
                SECRET,
                Some("1531420618"),
                Some(want),
                body.as_bytes(),
                1531420618 + 10
            ),
            Err(Refused::Stale),
            "the crate's verifier reads the real clock: an old example is stale"
        );
    }

    #[test]
    fn signature_table() {
        let t = now();
        let ts = t.to_string();
        let body = r#"{"type":"event_callback"}"#;
        let good = sign(SECRET, &ts, body);
        let old_ts = (t - 6 * 60).to_string();
        let old = sign(SECRET, &old_ts, body);
        type Case<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            &'a str,
            Result<(), Refused>,
        );
        let cases: [Case<'_>; 7] = [
            (Some(&ts), Some(&good), body, Ok(())),
            (
                Some(&ts),
                Some(&good),
                r#"{"type":"event_callback" }"#,
                Err(Refused::BadSignature),
            ),
            (Some(&ts), Some("v0=00"), body, Err(Refused::BadSignature)),
            (Some(&old_ts), Some(&old), body, Err(Refused::Stale)),
            (None, Some(&good), body, Err(Refused::Missing)),
            (Some(&ts), None, body, Err(Refused::Missing)),
            (Some("soon"), Some(&good), body, Err(Refused::Stale)),
        ];
        for (ts, sig, body, want) in cases {
            assert_eq!(
                check(SECRET, ts, sig, body.as_bytes(), t),
                want,
                "{ts:?} {sig:?} {body}"
            );
        }
        let other = sign("another secret", &ts, body);
        assert_eq!(
            check(SECRET, Some(&ts), Some(&other), body.as_bytes(), t),
            Err(Refused::BadSignature)
        );
        assert_eq!(
            check(SECRET, Some(&ts), Some(&good), &[0xff, 0xfe], t),
            Err(Refused::BadSignature)
        );
    }
}
