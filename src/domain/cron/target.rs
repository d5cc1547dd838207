//! Where a cron job delivers: the `deliver = ["telegram:-100123:7", …]` strings of a job.
//!
//! Parsing is strict because a wrong id does not fail loudly later: a brief sent to the wrong
//! chat, or to none, looks like success to the scheduler. This module only names a
//! destination and its lane; it must not send anything or name a platform crate. Which ids a
//! platform accepts is that platform's fact ([`TargetSyntax`]), handed in by the caller.
//!
//! A target is stored as its parts; the string form (`telegram:-100:7`) older releases stored
//! in inbox events' `deliver_to` still reads.

use serde::{Deserialize, Deserializer, Serialize};

use crate::domain::{LaneKey, Platform};

/// A delivery destination: a chat on a platform, optionally a thread in it. The same three
/// parts an incoming message from there carries, so the lane is the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Target {
    pub platform: Platform,
    pub chat: String,
    pub thread: Option<String>,
}

/// How one platform spells `chat[:thread]` after `platform:`, and what it accepts: Telegram
/// chats are numbers, a Matrix room id holds a `:`. Each platform declares its own.
pub type TargetSyntax = fn(&str) -> Result<(String, Option<String>), String>;

/// The platforms a deployment knows, as the target parser needs them: each one's syntax,
/// whether it is configured here, and how to turn it on. Built from the platform registry
/// (`crate::config::registry`); the domain only reads it.
#[derive(Debug, Clone, Default)]
pub struct Deliverable {
    pub platforms: Vec<DeliverablePlatform>,
}

#[derive(Debug, Clone)]
pub struct DeliverablePlatform {
    pub platform: Platform,
    pub syntax: TargetSyntax,
    /// The adapter runs in this deployment (its token is set).
    pub configured: bool,
    /// What to set to turn it on (`set telegram.token or TELEGRAM_BOT_TOKEN`).
    pub how_to_enable: &'static str,
}

impl Deliverable {
    pub fn get(&self, p: Platform) -> Option<&DeliverablePlatform> {
        self.platforms.iter().find(|d| d.platform == p)
    }

    /// The configured platforms only (a test's or a CLI's narrower view).
    pub fn configured(&self) -> Vec<Platform> {
        self.platforms
            .iter()
            .filter(|d| d.configured)
            .map(|d| d.platform)
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("unknown platform {platform:?} in delivery target {target:?} (known: {known})")]
    UnknownPlatform {
        target: String,
        platform: String,
        known: String,
    },
    #[error("invalid delivery target {target:?}: {reason}")]
    Invalid { target: String, reason: String },
}

/// Parses `<platform>:<chat>[:<thread>]` with the platform's own syntax for the rest.
pub fn parse_target(s: &str, known: &Deliverable) -> Result<Target, TargetError> {
    let target = s.trim();
    let invalid = |reason: &str| TargetError::Invalid {
        target: target.to_string(),
        reason: reason.to_string(),
    };
    let Some((name, rest)) = target.split_once(':') else {
        return Err(invalid("expected <platform>:<id>"));
    };
    let platform = Platform::parse(&name.to_ascii_lowercase());
    let Some(rule) = platform.and_then(|p| known.get(p)) else {
        let mut names: Vec<&str> = known
            .platforms
            .iter()
            .map(|d| d.platform.as_str())
            .collect();
        names.sort_unstable();
        return Err(TargetError::UnknownPlatform {
            target: target.to_string(),
            platform: name.to_string(),
            known: names.join(", "),
        });
    };
    let (chat, thread) = (rule.syntax)(rest).map_err(|reason| invalid(&reason))?;
    Ok(Target {
        platform: rule.platform,
        chat,
        thread,
    })
}

/// `chat[:thread]` where neither part holds a `:` (Telegram, Discord, Slack): the common case,
/// for a platform's syntax to call before it checks the parts.
pub fn split_chat_thread(rest: &str) -> Result<(&str, Option<&str>), String> {
    let mut parts = rest.split(':');
    let chat = parts.next().unwrap_or("");
    let thread = parts.next();
    if parts.next().is_some() {
        return Err("too many ':'-separated parts".into());
    }
    Ok((chat, thread))
}

impl Target {
    pub fn new(platform: Platform, chat: impl Into<String>, thread: Option<String>) -> Target {
        Target {
            platform,
            chat: chat.into(),
            thread,
        }
    }

    /// The lane a delivery lands in: the same key an incoming message from there gets, so a
    /// brief and the person's reply to it share one conversation.
    pub fn lane_key(&self) -> LaneKey {
        LaneKey::from_parts(self.platform.as_str(), &self.chat, self.thread.as_deref())
    }

    /// A target as stored by releases that wrote the string form (`telegram:-100:7`): only
    /// Telegram, Discord and web targets were written so, and none of their ids holds a `:`.
    fn from_stored_string(s: &str) -> Option<Target> {
        let (name, rest) = s.trim().split_once(':')?;
        let (chat, thread) = split_chat_thread(rest).ok()?;
        let platform = Platform::parse(&name.to_ascii_lowercase())?;
        (!chat.is_empty()).then(|| Target::new(platform, chat, thread.map(str::to_string)))
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.lane_key().as_str())
    }
}

/// Reads the stored form: today's `{platform, chat, thread}` or an older release's string.
impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Target, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Parts {
                platform: Platform,
                chat: String,
                #[serde(default)]
                thread: Option<String>,
            },
            Text(String),
        }
        match Stored::deserialize(d)? {
            Stored::Parts {
                platform,
                chat,
                thread,
            } => Ok(Target::new(platform, chat, thread)),
            Stored::Text(s) => Target::from_stored_string(&s)
                .ok_or_else(|| serde::de::Error::custom(format!("invalid target {s:?}"))),
        }
    }
}

/// Reads a stored `deliver_to` list, skipping (with a warning) an entry that no longer parses:
/// one bad target must not make the whole inbox event unreadable.
pub fn deserialize_targets<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Target>, D::Error> {
    let raw = Vec::<serde_json::Value>::deserialize(d)?;
    Ok(raw
        .into_iter()
        .filter_map(|v| match serde_json::from_value::<Target>(v.clone()) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(target = %v, error = %e, "skipping an invalid delivery target");
                None
            }
        })
        .collect())
}

/// The three platforms the domain's own tests deliver to, with the id rules their adapters
/// declare (numbers for Telegram and Discord, a plain lane name for the web chat), all
/// configured. The real rules live with each adapter.
#[cfg(test)]
pub(crate) fn test_known() -> Deliverable {
    fn number(rest: &str, signed: bool) -> Result<(String, Option<String>), String> {
        let (chat, thread) = split_chat_thread(rest)?;
        let digits = chat.strip_prefix('-').filter(|_| signed).unwrap_or(chat);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || chat == "0" {
            return Err("chat id must be a number".into());
        }
        if thread.is_some_and(|t| t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit())) {
            return Err("thread id must be a positive number".into());
        }
        Ok((chat.into(), thread.map(str::to_string)))
    }
    fn web(rest: &str) -> Result<(String, Option<String>), String> {
        match split_chat_thread(rest)? {
            (lane, None) if !lane.is_empty() => Ok((lane.into(), None)),
            _ => Err("web targets take no thread: use web:<lane>".into()),
        }
    }
    let entry = |name, syntax, how_to_enable| DeliverablePlatform {
        platform: Platform::named(name),
        syntax,
        configured: true,
        how_to_enable,
    };
    Deliverable {
        platforms: vec![
            entry("telegram", |r| number(r, true), "set telegram.token"),
            entry("discord", |r| number(r, false), "set discord.token"),
            entry("web", web, "set web.enabled = true"),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(rest: &str) -> Result<(String, Option<String>), String> {
        let (chat, thread) = split_chat_thread(rest)?;
        if chat.is_empty() || !chat.bytes().all(|b| b.is_ascii_digit()) {
            return Err("chat id must be a number".into());
        }
        Ok((chat.into(), thread.map(str::to_string)))
    }

    fn room(rest: &str) -> Result<(String, Option<String>), String> {
        // A room id holds one `:` (`!abc:example.org`); a thread follows after another.
        let mut parts = rest.splitn(3, ':');
        let (a, b, t) = (parts.next(), parts.next(), parts.next());
        match (a, b) {
            (Some(a), Some(b)) if a.starts_with('!') => {
                Ok((format!("{a}:{b}"), t.map(str::to_string)))
            }
            _ => Err("room id must look like !id:server".into()),
        }
    }

    fn known() -> Deliverable {
        let entry = |name, syntax| DeliverablePlatform {
            platform: Platform::named(name),
            syntax,
            configured: true,
            how_to_enable: "",
        };
        Deliverable {
            platforms: vec![entry("chat", digits), entry("matrix", room)],
        }
    }

    #[test]
    fn each_platform_parses_its_own_ids() {
        let t = parse_target(" Chat:42:7 ", &known()).unwrap();
        assert_eq!(
            t,
            Target::new(Platform::named("chat"), "42", Some("7".into()))
        );
        assert_eq!(t.lane_key().as_str(), "chat:42:7");
        let m = parse_target("matrix:!abc:example.org:$root", &known()).unwrap();
        assert_eq!(m.chat, "!abc:example.org");
        assert_eq!(m.thread.as_deref(), Some("$root"));
        for (bad, want) in [
            ("chat", "expected <platform>:<id>"),
            ("chat:x", "chat id must be a number"),
            ("chat:1:2:3", "too many ':'-separated parts"),
            (
                "irc:1",
                "unknown platform \"irc\" in delivery target \"irc:1\" (known: chat, matrix)",
            ),
            ("matrix:abc", "room id must look like"),
        ] {
            let err = parse_target(bad, &known()).expect_err(bad).to_string();
            assert!(err.contains(want), "{bad:?}: {err}");
        }
    }

    #[test]
    fn serde_writes_parts_and_reads_the_older_string_form() {
        let t = Target::new(Platform::named("matrix"), "!a:b.org", None);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(
            json,
            r#"{"platform":"matrix","chat":"!a:b.org","thread":null}"#
        );
        assert_eq!(serde_json::from_str::<Target>(&json).unwrap(), t);
        let old: Target = serde_json::from_str("\"telegram:-100:7\"").unwrap();
        assert_eq!(
            old,
            Target::new(Platform::named("telegram"), "-100", Some("7".into()))
        );
        assert!(serde_json::from_str::<Target>("\"nothing\"").is_err());
    }
}
