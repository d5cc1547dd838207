//! The `[memory]` section and the `[[people]]` list: long-term memory files, the optional
//! recall provider, and which sender identities are one person.
//!
//! A person is the unit memory belongs to. Without a `[[people]]` entry every sender identity
//! is its own person (`telegram-<id>`, `discord-<id>`, `web-<sender>`); a `[[people]]` entry
//! names a person and links identities across platforms. The person key becomes a folder name,
//! so it is checked (names) or cleaned (ids) here, once; what memory *is* lives in
//! `crate::agent::memory`.

use serde::{Deserialize, Serialize};

use super::ConfigUrl;

/// `[[people]]`: one named person and the sender identities (`platform:sender_id`) that are them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Person {
    pub name: String,
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Per-person memory: the snapshot in a new private session's prompt and the `memory`
    /// tool. Off: neither (the files stay on disk).
    pub enabled: bool,
    /// Cap of MEMORY.md (the agent's notes about its work with the person), in characters.
    pub memory_chars: usize,
    /// Cap of USER.md (what the agent knows about the person), in characters.
    pub user_chars: usize,
    /// Longest single entry (one line), in characters.
    pub entry_chars: usize,
    /// Where the memory files live; unset: `<data-dir>/memory` (each of `[[agents]]` has its
    /// own, `<data-dir>/agents/<name>/memory`).
    pub dir: Option<std::path::PathBuf>,
    pub provider: MemoryProviderConfig,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            enabled: true,
            memory_chars: 2200,
            user_chars: 1375,
            entry_chars: 400,
            dir: None,
            provider: MemoryProviderConfig::default(),
        }
    }
}

/// `[memory.provider]`: an HTTP endpoint that recalls text for a person's message.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryProviderConfig {
    /// `POST {person, message}` → `{"text": "…"}`. Unset: no provider (the default).
    pub url: Option<ConfigUrl>,
    /// How long a turn waits for the recall before going on without it.
    pub timeout_ms: u64,
    /// Recall longer than this reaches the model as a preview; the whole is saved to a file.
    pub max_chars: usize,
    /// `POST {person, session_id, rows}` to `<url>/compaction` before a compaction (best effort).
    pub notify_compaction: bool,
}

impl Default for MemoryProviderConfig {
    fn default() -> Self {
        MemoryProviderConfig {
            url: None,
            timeout_ms: 1500,
            max_chars: 4000,
            notify_compaction: true,
        }
    }
}

const PLATFORM_PREFIXES: [&str; 4] = ["telegram-", "discord-", "web-", "cron-"];

/// Whether `s` is safe as one path segment: 1-64 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
pub fn safe_segment(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The folder name of an unlinked identity: `platform-sender`, characters outside
/// `A-Z a-z 0-9 . _ -` as `_`. When cleaning changed it or it is longer than 64 characters it
/// ends in `-` and a hash of the whole raw name, so `josé` and `jos?` are two people; a name
/// that needed no cleaning is kept byte for byte (existing folders keep working).
fn identity_key(platform: &str, sender: &str) -> String {
    let raw = format!("{platform}-{sender}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean == raw && clean.len() <= 64 {
        return clean;
    }
    use sha2::{Digest, Sha256};
    let h = hex::encode(Sha256::digest(raw.as_bytes()));
    format!("{}-{}", &clean[..clean.len().min(47)], &h[..16])
}

/// The person a sender identity belongs to: the `[[people]]` name that lists `platform:sender`,
/// else the cleaned identity. `None` for scheduled runs, which serve nobody in particular.
pub fn person_key(people: &[Person], platform: &str, sender: &str) -> Option<String> {
    if platform == "cron" || sender.is_empty() {
        return None;
    }
    let id = format!("{platform}:{sender}");
    if let Some(p) = people.iter().find(|p| p.ids.contains(&id)) {
        return Some(p.name.clone());
    }
    Some(identity_key(platform, sender))
}

/// A `[[people]]` entry that breaks a rule; `index` is its position in the list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeopleError {
    #[error("people[{index}].name: {name:?} must be 1-64 characters from A-Z a-z 0-9 . _ - (not starting with a dot)")]
    BadName { index: usize, name: String },
    #[error("people[{index}].name: {name:?} could be mistaken for an unlinked identity; pick a name not starting with telegram-, discord-, web- or cron-")]
    LooksLikeIdentity { index: usize, name: String },
    #[error("people[{index}].name: {name:?} is used twice")]
    Twice { index: usize, name: String },
    #[error("people[{index}].ids: {id:?} is not an identity like telegram:123, discord:456 or web:alice")]
    BadId { index: usize, id: String },
    #[error("people[{index}].ids: {id:?} is already linked to {other:?}; an identity belongs to one person")]
    Linked {
        index: usize,
        id: String,
        other: String,
    },
}

/// `[[people]]` rules: names are unique safe path segments that cannot pass for an unlinked
/// identity; each id is `platform:sender` and belongs to at most one person.
pub fn check_people(people: &[Person]) -> Result<(), PeopleError> {
    let mut seen_ids = std::collections::HashMap::new();
    for (index, p) in people.iter().enumerate() {
        let name = || p.name.clone();
        if !safe_segment(&p.name) {
            return Err(PeopleError::BadName {
                index,
                name: name(),
            });
        }
        if PLATFORM_PREFIXES.iter().any(|pre| p.name.starts_with(pre)) {
            return Err(PeopleError::LooksLikeIdentity {
                index,
                name: name(),
            });
        }
        if people[..index].iter().any(|q| q.name == p.name) {
            return Err(PeopleError::Twice {
                index,
                name: name(),
            });
        }
        for id in &p.ids {
            let ok = crate::domain::Person::parse(id).is_some_and(|p| {
                super::registry::spec(p.platform).is_some_and(|s| (s.person_id)(&p.id))
            });
            if !ok {
                return Err(PeopleError::BadId {
                    index,
                    id: id.clone(),
                });
            }
            if let Some(other) = seen_ids.insert(id.clone(), p.name.clone()) {
                return Err(PeopleError::Linked {
                    index,
                    id: id.clone(),
                    other,
                });
            }
        }
    }
    Ok(())
}

impl MemoryConfig {
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.memory_chars < 100 || self.user_chars < 100 {
            return Err((
                "memory.memory_chars",
                "memory_chars and user_chars must be at least 100".into(),
            ));
        }
        if self.entry_chars < 20 {
            return Err(("memory.entry_chars", "must be at least 20".into()));
        }
        if let Some(u) = &self.provider.url {
            if !u.is_http() {
                return Err((
                    "memory.provider.url",
                    format!("{u:?} is not an http(s) URL like http://127.0.0.1:7070/recall"),
                ));
            }
        }
        if self.provider.timeout_ms == 0 {
            return Err(("memory.provider.timeout_ms", "must be above 0".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Vec<Person> {
        vec![Person {
            name: "owner".into(),
            ids: vec!["telegram:123".into(), "discord:456".into()],
        }]
    }

    #[test]
    fn person_keys() {
        let p = owner();
        assert_eq!(person_key(&p, "telegram", "123").as_deref(), Some("owner"));
        assert_eq!(person_key(&p, "discord", "456").as_deref(), Some("owner"));
        assert_eq!(
            person_key(&p, "discord", "123").as_deref(),
            Some("discord-123")
        );
        assert_eq!(
            person_key(&p, "web", "../../etc").as_deref(),
            Some("web-.._.._etc-f2dc6d64aa3dc363")
        );
        // Names that clean alike are two people; a clean name is kept as it is.
        let jose = person_key(&p, "web", "josé").unwrap();
        let jos = person_key(&p, "web", "jos?").unwrap();
        assert_eq!(jose, "web-jos_-ede189ff4a645f3f");
        assert_eq!(jos, "web-jos_-053d328c9a042c91");
        assert_eq!(person_key(&p, "web", "jos_").as_deref(), Some("web-jos_"));
        assert!(safe_segment(&jose) && safe_segment(&jos));
        assert_eq!(person_key(&p, "cron", "scheduler"), None);
        let long = person_key(&p, "web", &"x".repeat(200)).unwrap();
        assert_eq!(long.len(), 64);
        assert!(safe_segment(&long));
    }

    #[test]
    fn people_rules() {
        assert!(check_people(&owner()).is_ok());
        let bad = |name: &str, ids: &[&str]| {
            let mut p = owner();
            p.push(Person {
                name: name.into(),
                ids: ids.iter().map(|s| s.to_string()).collect(),
            });
            check_people(&p).unwrap_err().to_string()
        };
        assert!(bad("owner", &[]).contains("used twice"));
        assert!(bad("../x", &[]).contains("must be 1-64"));
        assert!(bad(".hidden", &[]).contains("must be 1-64"));
        assert!(bad("telegram-9", &[]).contains("mistaken"));
        assert!(bad("pat", &["telegram:123"]).contains("already linked to \"owner\""));
        assert!(bad("pat", &["sms:1"]).contains("not an identity"));
    }
}
