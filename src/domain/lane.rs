//! The lane key: the stable name of one conversation.
//!
//! A lane is `platform:chat_id[:thread_id]`. Sessions rotate inside a lane; the lane stays, so
//! everything keyed per conversation (leases, capsules, queues) is keyed by this. The cleaning
//! rule is exact and must never become a plain truncation: two long ids sharing a prefix must
//! not collapse into one lane.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Longest cleaned key kept as is.
pub const MAX_LANE_KEY_LEN: usize = 120;
const HASHED_PREFIX_LEN: usize = 99;
const HASH_HEX_LEN: usize = 20;

/// A cleaned, length-bounded conversation key. Construct with [`LaneKey::new`] or
/// [`LaneKey::from_parts`]; parse a stored key with [`LaneKey::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LaneKey(String);

impl LaneKey {
    /// Builds the key from its parts; the raw form is `platform:chat[:thread]`.
    pub fn from_parts(platform: &str, chat_id: &str, thread_id: Option<&str>) -> LaneKey {
        let raw = match thread_id {
            Some(t) if !t.is_empty() => format!("{platform}:{chat_id}:{t}"),
            _ => format!("{platform}:{chat_id}"),
        };
        LaneKey::new(&raw)
    }

    /// Cleans a raw key: characters outside `[A-Za-z0-9._:-]` become `_`. A key that cleaning
    /// changed, or that is longer than 120 characters, becomes its cleaned form (cut to 99
    /// characters), `-`, and the first 20 hex digits of sha256 of the *raw* key: `web:café`
    /// and `web:caf?` both clean to `web:caf_` and must still be two conversations. A clean
    /// key of at most 120 characters is kept byte for byte, so stored keys parse to themselves.
    pub fn new(raw: &str) -> LaneKey {
        let cleaned: String = raw
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        // After cleaning every char is ASCII, so char count == byte count.
        if cleaned == raw && cleaned.len() <= MAX_LANE_KEY_LEN {
            return LaneKey(cleaned);
        }
        let digest = hex::encode(Sha256::digest(raw.as_bytes()));
        LaneKey(format!(
            "{}-{}",
            &cleaned[..cleaned.len().min(HASHED_PREFIX_LEN)],
            &digest[..HASH_HEX_LEN]
        ))
    }

    /// Accepts a key that is already clean (as stored or typed by an operator); anything else
    /// is cleaned, so the result is always a valid key.
    pub fn parse(s: &str) -> LaneKey {
        LaneKey::new(s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The platform part (before the first `:`).
    pub fn platform(&self) -> &str {
        self.0.split(':').next().unwrap_or("")
    }

    /// Cron lanes belong to scheduled jobs, never to a person.
    pub fn is_cron(&self) -> bool {
        self.platform() == "cron"
    }
}

/// A key read back from the store (or typed by an operator); see [`LaneKey::parse`].
impl From<String> for LaneKey {
    fn from(s: String) -> LaneKey {
        LaneKey::parse(&s)
    }
}

impl From<&str> for LaneKey {
    fn from(s: &str) -> LaneKey {
        LaneKey::parse(s)
    }
}

/// Rows compare with the key's text (`row.lane == "web:main"`).
impl PartialEq<&str> for LaneKey {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for LaneKey {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl fmt::Display for LaneKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_key_table() {
        let cases: &[(&str, &str)] = &[
            ("telegram:1033877751", "telegram:1033877751"),
            ("telegram:-100123:42", "telegram:-100123:42"),
            ("web:alice", "web:alice"),
            ("web:alice smith", "web:alice_smith-3607fb4ec842c019eab0"),
            ("discord:1/2?3", "discord:1_2_3-89c948de42e2973eda7a"),
            ("web:café", "web:caf_-639236db925d935cf839"),
            ("web:caf?", "web:caf_-2ea8244a7be9c75c8b02"),
            ("web:a.b_c-d", "web:a.b_c-d"),
            // A key that is already clean (as stored) is kept byte for byte, hashed or not.
            ("web:caf_", "web:caf_"),
            (
                "web:caf_-639236db925d935cf839",
                "web:caf_-639236db925d935cf839",
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(LaneKey::new(raw).as_str(), *want, "raw {raw:?}");
        }
    }

    #[test]
    fn from_parts_adds_thread_only_when_present() {
        assert_eq!(
            LaneKey::from_parts("telegram", "-100", Some("7")).as_str(),
            "telegram:-100:7"
        );
        assert_eq!(
            LaneKey::from_parts("telegram", "-100", None).as_str(),
            "telegram:-100"
        );
        assert_eq!(
            LaneKey::from_parts("telegram", "-100", Some("")).as_str(),
            "telegram:-100"
        );
    }

    #[test]
    fn exactly_120_is_kept_121_is_hashed() {
        let at = format!("web:{}", "x".repeat(116));
        assert_eq!(at.len(), 120);
        assert_eq!(LaneKey::new(&at).as_str(), at);
        let over = format!("web:{}", "x".repeat(117));
        let key = LaneKey::new(&over);
        assert_eq!(key.as_str().len(), 120);
        assert_eq!(&key.as_str()[..99], &over[..99]);
        assert_eq!(&key.as_str()[99..100], "-");
        let digest = hex::encode(Sha256::digest(over.as_bytes()));
        assert_eq!(&key.as_str()[100..], &digest[..20]);
    }

    #[test]
    fn long_ids_sharing_120_chars_get_different_keys() {
        let prefix = format!("teams:19:abc-def-1234-guid-less:topic:{}", "a".repeat(82));
        assert_eq!(prefix.len(), 120);
        let a = format!("{prefix}{}", "a".repeat(19));
        let b = format!("{prefix}{}", "b".repeat(19));
        assert_eq!(a.len(), 139);
        let (ka, kb) = (LaneKey::new(&a), LaneKey::new(&b));
        assert_ne!(ka, kb);
        assert_eq!(ka.as_str().len(), 120);
        assert_eq!(kb.as_str().len(), 120);
    }

    #[test]
    fn hash_is_of_the_raw_key_not_the_cleaned_one() {
        // Two raw keys that clean to the same long string must still differ.
        let a = format!("web:{} é", "y".repeat(130));
        let b = format!("web:{} ü", "y".repeat(130));
        assert_ne!(LaneKey::new(&a), LaneKey::new(&b));
    }

    #[test]
    fn names_that_clean_alike_stay_apart_and_clean_keys_reparse_to_themselves() {
        let raws = ["web:café", "web:caf?", "web:caf_", "web:caf ", "web:cafè"];
        let keys: Vec<LaneKey> = raws.iter().map(|r| LaneKey::new(r)).collect();
        for (i, a) in keys.iter().enumerate() {
            assert_eq!(LaneKey::parse(a.as_str()), *a, "{a} reparses to itself");
            for b in &keys[i + 1..] {
                assert_ne!(a, b, "{raws:?}");
            }
        }
        // A long changed key stays within the bound.
        let long = format!("web:{}", "é".repeat(200));
        assert_eq!(LaneKey::new(&long).as_str().len(), MAX_LANE_KEY_LEN);
    }

    #[test]
    fn platform_and_cron() {
        assert_eq!(LaneKey::new("cron:morning").platform(), "cron");
        assert!(LaneKey::new("cron:morning").is_cron());
        assert!(!LaneKey::new("web:cron").is_cron());
    }
}
