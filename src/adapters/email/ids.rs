//! Herald's own Message-IDs: derived from the outbox row's key (the same row always gets the
//! same id, which is how a resend after a crash is found in the Sent folder), and marked when
//! they open a thread for a lane that has none (a cron brief to a bare address), so that a
//! reply to such a thread comes back to that lane.

use sha2::{Digest, Sha256};

/// The Message-ID (without angle brackets) of the mail sending outbox row `key` (or asking
/// approval `key`): `herald.<32 hex>.<t|n>@<domain>`, `n` when it opens a thread of its own
/// for a lane without one.
pub fn message_id(key: &str, domain: &str, opens_thread: bool) -> String {
    let digest = hex::encode(Sha256::digest(key.as_bytes()));
    let mark = if opens_thread { 'n' } else { 't' };
    format!("herald.{}.{mark}@{domain}", &digest[..32])
}

/// Whether `id` is one of ours that opened a thread for a lane without one.
pub fn opens_bare_lane(id: &str, domain: &str) -> bool {
    id.strip_prefix("herald.")
        .and_then(|rest| rest.strip_suffix(domain))
        .and_then(|rest| rest.strip_suffix(".n@"))
        .is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_marked() {
        let a = message_id("email:a@x:1:turn:0", "example.net", false);
        assert_eq!(a, message_id("email:a@x:1:turn:0", "example.net", false));
        assert_ne!(a, message_id("email:a@x:1:turn:1", "example.net", false));
        assert!(!opens_bare_lane(&a, "example.net"));
        let n = message_id("k", "example.net", true);
        assert!(opens_bare_lane(&n, "example.net"));
        assert!(!opens_bare_lane(&n, "other.net"));
        assert!(!opens_bare_lane("herald.zz.n@example.net", "example.net"));
    }
}
