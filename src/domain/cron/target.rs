//! Where a cron job delivers: the `deliver = ["telegram:-100123:7", …]` strings of a job.
//!
//! Parsing is strict because a wrong id does not fail loudly later: a brief sent to the wrong
//! chat, or to none, looks like success to the scheduler. This module only names a
//! destination and its lane; it must not send anything or name a platform crate.
//!
//! A target (de)serializes as its string form (`telegram:-100:7`), which is how inbox events
//! written by older versions hold `deliver_to`, so those rows still read.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::domain::{LaneKey, Platform};

/// Longest web lane name accepted; web lanes are named by the web chat, never by a person.
const MAX_WEB_LANE_LEN: usize = 100;

/// A delivery destination of a cron job.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A Telegram chat (negative for groups and channels), optionally a forum topic.
    Telegram {
        chat: String,
        thread: Option<String>,
    },
    /// A Discord channel, optionally a thread in it.
    Discord {
        channel: String,
        thread: Option<String>,
    },
    /// A web chat lane.
    Web { lane: String },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error(
        "unknown platform {platform:?} in delivery target {target:?} (expected telegram:<chat>[:<thread>], discord:<channel>[:<thread>] or web:<lane>)"
    )]
    UnknownPlatform { target: String, platform: String },
    #[error("invalid delivery target {target:?}: {reason}")]
    Invalid { target: String, reason: String },
}

/// Parses `telegram:<chat>[:<thread>]`, `discord:<channel>[:<thread>]` or `web:<lane>`.
pub fn parse_target(s: &str) -> Result<Target, TargetError> {
    let target = s.trim();
    let invalid = |reason: &str| TargetError::Invalid {
        target: target.to_string(),
        reason: reason.to_string(),
    };
    let parts: Vec<&str> = target.split(':').collect();
    let platform = parts[0].to_ascii_lowercase();
    let (id, thread) = match parts.as_slice() {
        [_, id] => (*id, None),
        [_, id, thread] => (*id, Some(*thread)),
        [_] => return Err(invalid("expected <platform>:<id>")),
        _ => return Err(invalid("too many ':'-separated parts")),
    };
    match platform.as_str() {
        "telegram" => {
            if !is_integer(id, true) {
                return Err(invalid(
                    "telegram chat id must be a number (negative for groups and channels)",
                ));
            }
            if thread.is_some_and(|t| !is_integer(t, false)) {
                return Err(invalid(
                    "telegram topic (thread) id must be a positive number",
                ));
            }
            Ok(Target::Telegram {
                chat: id.to_string(),
                thread: thread.map(str::to_string),
            })
        }
        "discord" => {
            if !is_integer(id, false) {
                return Err(invalid("discord channel id must be a number (a snowflake)"));
            }
            if thread.is_some_and(|t| !is_integer(t, false)) {
                return Err(invalid("discord thread id must be a number (a snowflake)"));
            }
            Ok(Target::Discord {
                channel: id.to_string(),
                thread: thread.map(str::to_string),
            })
        }
        "web" => {
            if thread.is_some() {
                return Err(invalid("web targets take no thread: use web:<lane>"));
            }
            let valid = !id.is_empty()
                && id.len() <= MAX_WEB_LANE_LEN
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
            if !valid {
                return Err(invalid(
                    "web lane must be 1-100 characters from A-Z a-z 0-9 . _ -",
                ));
            }
            Ok(Target::Web {
                lane: id.to_string(),
            })
        }
        _ => Err(TargetError::UnknownPlatform {
            target: target.to_string(),
            platform: parts[0].to_string(),
        }),
    }
}

/// A decimal id that fits in 64 bits; zero is never a real chat, channel or topic.
fn is_integer(s: &str, allow_negative: bool) -> bool {
    let digits = match s.strip_prefix('-') {
        Some(rest) if allow_negative => rest,
        Some(_) => return false,
        None => s,
    };
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && s.parse::<i128>()
            .is_ok_and(|n| n != 0 && n >= i64::MIN as i128 && n <= u64::MAX as i128)
}

impl Target {
    pub fn platform(&self) -> Platform {
        match self {
            Target::Telegram { .. } => Platform::Telegram,
            Target::Discord { .. } => Platform::Discord,
            Target::Web { .. } => Platform::Web,
        }
    }

    /// The lane a delivery lands in: the same key an incoming message from there gets, so a
    /// brief and the person's reply to it share one conversation.
    pub fn lane_key(&self) -> LaneKey {
        let platform = self.platform().as_str();
        match self {
            Target::Telegram { chat, thread } => {
                LaneKey::from_parts(platform, chat, thread.as_deref())
            }
            Target::Discord { channel, thread } => {
                LaneKey::from_parts(platform, channel, thread.as_deref())
            }
            Target::Web { lane } => LaneKey::from_parts(platform, lane, None),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.lane_key().as_str())
    }
}

impl std::str::FromStr for Target {
    type Err = TargetError;
    fn from_str(s: &str) -> Result<Target, TargetError> {
        parse_target(s)
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Target, D::Error> {
        let s = String::deserialize(d)?;
        parse_target(&s).map_err(serde::de::Error::custom)
    }
}

/// Reads a stored `deliver_to` list, skipping (with a warning) an entry that no longer parses,
/// as the lane worker did when the list was plain strings: one bad target must not make the
/// whole inbox event unreadable.
pub fn deserialize_targets<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Target>, D::Error> {
    let raw = Vec::<String>::deserialize(d)?;
    Ok(raw
        .iter()
        .filter_map(|spec| match parse_target(spec) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(target = %spec, error = %e, "skipping an invalid delivery target");
                None
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_parse_table() {
        let tg = |chat: &str, thread: Option<&str>| Target::Telegram {
            chat: chat.into(),
            thread: thread.map(Into::into),
        };
        let dc = |channel: &str, thread: Option<&str>| Target::Discord {
            channel: channel.into(),
            thread: thread.map(Into::into),
        };
        let good: &[(&str, Target, &str)] = &[
            ("telegram:12345", tg("12345", None), "telegram:12345"),
            (
                "telegram:-1001234567890",
                tg("-1001234567890", None),
                "telegram:-1001234567890",
            ),
            (
                "telegram:-1001234567890:7",
                tg("-1001234567890", Some("7")),
                "telegram:-1001234567890:7",
            ),
            (" Telegram:42 ", tg("42", None), "telegram:42"),
            (
                "discord:1234567890123456789",
                dc("1234567890123456789", None),
                "discord:1234567890123456789",
            ),
            ("discord:111:222", dc("111", Some("222")), "discord:111:222"),
            (
                "web:main",
                Target::Web {
                    lane: "main".into(),
                },
                "web:main",
            ),
            (
                "web:ops-brief_2.x",
                Target::Web {
                    lane: "ops-brief_2.x".into(),
                },
                "web:ops-brief_2.x",
            ),
        ];
        for (input, want, lane) in good {
            let got = parse_target(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(&got, want, "{input:?}");
            assert_eq!(got.lane_key().as_str(), *lane, "{input:?}");
        }

        let bad: &[(&str, &str)] = &[
            (
                "slack:C123",
                "unknown platform \"slack\" in delivery target \"slack:C123\"",
            ),
            (
                "telegram",
                "invalid delivery target \"telegram\": expected <platform>:<id>",
            ),
            ("telegram:", "telegram chat id must be a number"),
            ("telegram:@mychannel", "telegram chat id must be a number"),
            ("telegram:12a", "telegram chat id must be a number"),
            ("telegram:0", "telegram chat id must be a number"),
            ("telegram:-", "telegram chat id must be a number"),
            (
                "telegram:-100:",
                "telegram topic (thread) id must be a positive number",
            ),
            (
                "telegram:-100:-5",
                "telegram topic (thread) id must be a positive number",
            ),
            ("telegram:1:2:3", "too many ':'-separated parts"),
            ("discord:-123", "discord channel id must be a number"),
            ("discord:general", "discord channel id must be a number"),
            (
                "discord:99999999999999999999",
                "discord channel id must be a number",
            ),
            ("discord:1:x", "discord thread id must be a number"),
            ("web:", "web lane must be 1-100 characters"),
            ("web:a b", "web lane must be 1-100 characters"),
            ("web:a:b", "web targets take no thread"),
        ];
        for (input, want) in bad {
            let err = parse_target(input).expect_err(input).to_string();
            assert!(err.contains(want), "{input:?}: got {err:?}, want {want:?}");
        }
    }

    #[test]
    fn platform_matches_target_kind() {
        for (input, want) in [
            ("telegram:1", Platform::Telegram),
            ("discord:1", Platform::Discord),
            ("web:x", Platform::Web),
        ] {
            assert_eq!(parse_target(input).map(|t| t.platform()), Ok(want));
        }
    }

    #[test]
    fn serde_reads_and_writes_the_string_form() {
        let t = parse_target("telegram:-100:7").unwrap();
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"telegram:-100:7\"");
        let back: Target = serde_json::from_str("\"telegram:-100:7\"").unwrap();
        assert_eq!(back, t);
        assert!(serde_json::from_str::<Target>("\"slack:1\"").is_err());
    }
}
