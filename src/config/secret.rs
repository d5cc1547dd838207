//! A string that never prints: tokens and API keys go through this type so that `Debug`,
//! logs and error messages cannot leak them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The only way to read the value: call it where the secret is used, nowhere else.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this secret, in constant time (`same_secret`).
    pub fn matches(&self, given: &str) -> bool {
        same_secret(given.as_bytes(), self.0.as_bytes())
    }
}

/// Equality in constant time, also across lengths: both sides are hashed (SHA-256) and the
/// digests compared with `subtle`, so neither where they differ nor how long the secret is
/// shows in the time taken. Every comparison of a token, key or webhook secret goes through it.
pub fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    let (a, b) = (Sha256::digest(given), Sha256::digest(expected));
    a.ct_eq(&b).into()
}

impl PartialEq for Secret {
    fn eq(&self, other: &Secret) -> bool {
        same_secret(self.0.as_bytes(), other.0.as_bytes())
    }
}

impl Eq for Secret {}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if COMPARING.with(std::cell::Cell::get) {
            use sha2::{Digest, Sha256};
            return s.serialize_str(&hex::encode(Sha256::digest(self.0.as_bytes())));
        }
        s.serialize_str("***")
    }
}

thread_local! {
    static COMPARING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with secrets serializing as a SHA-256 digest instead of `***`, so that a
/// comparison of two serialized configurations (a reload's key diff) sees a changed token.
/// Only for values compared in memory and dropped: nothing serialized here may be shown.
pub fn comparing_secrets<R>(f: impl FnOnce() -> R) -> R {
    /// Puts `***` back even when `f` panics.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            COMPARING.with(|c| c.set(false));
        }
    }
    COMPARING.with(|c| c.set(true));
    let _reset = Reset;
    f()
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Secret, D::Error> {
        Ok(Secret(super::load::string_or_number(d)?))
    }
}

/// A URL without its password, for messages and logs (`postgres://u:***@host/db`).
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let s = Secret::new("sk-live-123");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"***\"");
        assert_eq!(s.expose(), "sk-live-123");
    }

    #[test]
    fn a_secret_matches_only_itself() {
        let s = Secret::new("s3cret-token");
        assert!(s.matches("s3cret-token"));
        for other in ["", "s3cret-toke", "s3cret-token!", "S3cret-token", "x"] {
            assert!(!s.matches(other), "{other:?}");
        }
        assert!(same_secret(b"", b""));
        assert_eq!(s, Secret::new("s3cret-token"));
        assert_ne!(s, Secret::new("s3cret-token "));
    }
}
