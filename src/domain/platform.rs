//! Who is on the other end: a platform's name and a person's identity on it.
//!
//! A platform is a validated name, not a closed list: the core never matches on which platform
//! an event came from. What differs between platforms (allowlists, id syntax, limits, markup,
//! what a message can carry) are facts the platform declares behind the contract
//! (`crate::config::registry`), so adding one is a new adapter module and nothing here.
//!
//! A person is `platform:id`, parsed once at the edge. The id is everything after the first
//! `:` and may itself contain `:` (a Matrix user is `@alice:example.org`).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest platform name: the name is stored inline so a `Platform` stays `Copy`.
pub const MAX_PLATFORM_LEN: usize = 15;

/// A platform's name: 1 to 15 lowercase ASCII letters (`telegram`, `slack`). Names are
/// stored in rows, lane keys and metric labels, so they are plain and stable.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Platform {
    len: u8,
    name: [u8; MAX_PLATFORM_LEN],
}

impl Platform {
    /// The local web chat (served by `http/`).
    pub const WEB: Platform = Platform::named("web");
    /// The OpenAI-compatible API (`http/openai/`): one key's conversations.
    pub const API: Platform = Platform::named("api");
    /// Scheduled jobs: their lanes belong to a job, never to a person.
    pub const CRON: Platform = Platform::named("cron");

    /// A name known at compile time; an invalid one fails the build (in a `const`) or panics.
    pub const fn named(s: &str) -> Platform {
        match Platform::from_bytes(s.as_bytes()) {
            Some(p) => p,
            None => panic!("a platform name is 1-15 lowercase ASCII letters"),
        }
    }

    /// A name read from a row, a lane key, a config value or a person's identity. Only the
    /// syntax is checked: whether this binary runs such a platform is the registry's answer.
    pub fn parse(s: &str) -> Option<Platform> {
        Platform::from_bytes(s.as_bytes())
    }

    const fn from_bytes(b: &[u8]) -> Option<Platform> {
        if b.is_empty() || b.len() > MAX_PLATFORM_LEN {
            return None;
        }
        let mut name = [0u8; MAX_PLATFORM_LEN];
        let mut i = 0;
        while i < b.len() {
            if !b[i].is_ascii_lowercase() {
                return None;
            }
            name[i] = b[i];
            i += 1;
        }
        Some(Platform {
            len: b.len() as u8,
            name,
        })
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII letters are ever stored (`from_bytes`).
        std::str::from_utf8(&self.name[..self.len as usize]).unwrap_or("")
    }
}

/// A platform name that is not a name at all (`Telegram`, `irc2`, empty).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid platform name {0:?} (1-15 lowercase letters)")]
pub struct UnknownPlatform(pub String);

impl TryFrom<String> for Platform {
    type Error = UnknownPlatform;
    fn try_from(s: String) -> Result<Platform, UnknownPlatform> {
        Platform::parse(&s).ok_or(UnknownPlatform(s))
    }
}

/// Rows compare with the platform's name (`row.platform == "telegram"`).
impl PartialEq<&str> for Platform {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Platform({})", self.as_str())
    }
}

impl Serialize for Platform {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Platform {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Platform, D::Error> {
        let s = String::deserialize(d)?;
        Platform::try_from(s).map_err(serde::de::Error::custom)
    }
}

/// One person on one platform: `telegram:42`, `slack:U024BE7LH`, `web:alice`. Parsed once
/// where it enters (an event, a config entry, a stored row), then passed as this type.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Person {
    pub platform: Platform,
    pub id: String,
}

impl Person {
    pub fn new(platform: Platform, id: impl Into<String>) -> Person {
        Person {
            platform,
            id: id.into(),
        }
    }

    /// `platform:id`; the id is the rest after the first `:` and must not be empty.
    pub fn parse(s: &str) -> Option<Person> {
        let (platform, id) = s.split_once(':')?;
        if id.is_empty() {
            return None;
        }
        Some(Person::new(Platform::parse(platform)?, id))
    }
}

impl fmt::Display for Person {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.platform, self.id)
    }
}

impl fmt::Debug for Person {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Person({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_once_and_round_trip() {
        for name in [
            "web", "telegram", "discord", "cron", "api", "slack", "matrix",
        ] {
            let p = Platform::parse(name).unwrap();
            assert_eq!(p.as_str(), name);
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<Platform>(&json).unwrap(), p);
        }
        for bad in [
            "",
            "Telegram",
            "irc2",
            "a:b",
            "sixteenletterssx",
            "tele gram",
        ] {
            assert_eq!(Platform::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Platform::WEB, "web");
    }

    #[test]
    fn a_person_keeps_colons_in_the_id() {
        let p = Person::parse("matrix:@alice:example.org").unwrap();
        assert_eq!(p.platform.as_str(), "matrix");
        assert_eq!(p.id, "@alice:example.org");
        assert_eq!(p.to_string(), "matrix:@alice:example.org");
        for bad in ["telegram", "telegram:", ":42", "Tele:42"] {
            assert_eq!(Person::parse(bad), None, "{bad:?}");
        }
    }
}
