//! A budget cap's name: which limit a refusal, an approvers' question, a grant and a metric
//! label are about.
//!
//! Caps are typed everywhere but in the store, which files grants and notices under the
//! cap's key (`daily`, `monthly`, `person_daily:<person>`, `cron_run:<job>`,
//! `agent_daily:<agent>`, `agent_person_daily:<agent>:<person>`); [`Cap::as_key`]
//! and [`Cap::parse`] are the one pair that writes and reads that text.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One budget cap.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Cap {
    /// All spending of one day.
    Daily,
    /// All spending of one month.
    Monthly,
    /// One person's spending of one day.
    PersonDaily(String),
    /// One run of a cron job.
    CronRun(String),
    /// All of one agent's spending of one day (`[[agents]] budget.daily`).
    AgentDaily(String),
    /// One person's spending with one agent in one day (`[[agents]] budget.person_daily`).
    AgentPersonDaily { agent: String, person: String },
}

impl Cap {
    /// The cap's kind without its subject: a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Cap::Daily => "daily",
            Cap::Monthly => "monthly",
            Cap::PersonDaily(_) => "person_daily",
            Cap::CronRun(_) => "cron_run",
            Cap::AgentDaily(_) => "agent_daily",
            Cap::AgentPersonDaily { .. } => "agent_person_daily",
        }
    }

    /// The text the store files the cap under.
    pub fn as_key(&self) -> String {
        match self {
            Cap::Daily | Cap::Monthly => self.kind().to_string(),
            Cap::PersonDaily(s) | Cap::CronRun(s) | Cap::AgentDaily(s) => {
                format!("{}:{s}", self.kind())
            }
            // An agent's name has no colon (`agents[].name`), so the first one ends it.
            Cap::AgentPersonDaily { agent, person } => format!("{}:{agent}:{person}", self.kind()),
        }
    }

    /// Reads a key [`Cap::as_key`] wrote; `None` for any other text.
    pub fn parse(key: &str) -> Option<Cap> {
        match key.split_once(':') {
            None if key == "daily" => Some(Cap::Daily),
            None if key == "monthly" => Some(Cap::Monthly),
            Some(("person_daily", p)) if !p.is_empty() => Some(Cap::PersonDaily(p.to_string())),
            Some(("cron_run", j)) if !j.is_empty() => Some(Cap::CronRun(j.to_string())),
            Some(("agent_daily", a)) if !a.is_empty() && !a.contains(':') => {
                Some(Cap::AgentDaily(a.to_string()))
            }
            Some(("agent_person_daily", rest)) => match rest.split_once(':') {
                Some((a, p)) if !a.is_empty() && !p.is_empty() => Some(Cap::AgentPersonDaily {
                    agent: a.to_string(),
                    person: p.to_string(),
                }),
                _ => None,
            },
            _ => None,
        }
    }
}

impl fmt::Display for Cap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_key())
    }
}

/// As its key, so rows written before the type (an approval's arguments) still read.
impl Serialize for Cap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_key())
    }
}

impl<'de> Deserialize<'de> for Cap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Cap, D::Error> {
        let key = String::deserialize(d)?;
        Cap::parse(&key).ok_or_else(|| serde::de::Error::custom(format!("no such cap: {key:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::Cap;

    #[test]
    fn keys_round_trip_and_unknown_keys_are_refused() {
        let caps = [
            Cap::Daily,
            Cap::Monthly,
            Cap::PersonDaily("alice".into()),
            Cap::CronRun("digest:weekly".into()),
            Cap::AgentDaily("coder".into()),
            Cap::AgentPersonDaily {
                agent: "coder".into(),
                person: "alice".into(),
            },
        ];
        let keys: Vec<String> = caps.iter().map(Cap::as_key).collect();
        assert_eq!(
            keys,
            [
                "daily",
                "monthly",
                "person_daily:alice",
                "cron_run:digest:weekly",
                "agent_daily:coder",
                "agent_person_daily:coder:alice",
            ]
        );
        for (cap, key) in caps.iter().zip(&keys) {
            assert_eq!(Cap::parse(key).as_ref(), Some(cap));
            let json = serde_json::to_string(cap).unwrap();
            assert_eq!(serde_json::from_str::<Cap>(&json).unwrap(), *cap);
        }
        for bad in [
            "",
            "weekly",
            "person_daily:",
            "daily:x",
            "cron_run",
            "agent_daily:",
            "agent_person_daily:coder",
            "agent_person_daily::alice",
            "agent_person_daily:coder:",
        ] {
            assert_eq!(Cap::parse(bad), None, "{bad}");
        }
    }
}
