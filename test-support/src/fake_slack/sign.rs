//! Slack's request signature: `v0=` + hex(HMAC-SHA256(signing secret, `v0:{ts}:{body}`)), with
//! HMAC written out over sha2 (RFC 2104) so the fake needs no crate herald does not have.
//!
//! Must not: be the only check of itself. The self-test verifies a signed post with its own
//! computation, and that computation against RFC 4231's test vector.

use sha2::{Digest, Sha256};

const BLOCK: usize = 64;

/// HMAC-SHA256 of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The `X-Slack-Signature` of `body` sent at `timestamp` (Unix seconds).
pub fn signature(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(body);
    format!("v0={}", hex::encode(hmac_sha256(secret.as_bytes(), &base)))
}
