//! What Slack is, for the core: its limits, id syntax, allowlist, pace and prompt hint, and
//! the `[slack]` section it owns (the platform contract's static half, `config::registry`).

use std::time::Duration;

use super::config::SlackConfig;
use super::SLACK;
use crate::config::FileAuth;
use crate::config::{Access, Admit, Capabilities, Config, ConfigError, PlatformSpec, Section};
use crate::delivery::pace::{Bucket, Limits, Window};
use crate::domain::cron::split_chat_thread;

pub static SPEC: PlatformSpec = PlatformSpec {
    name: SLACK,
    caps: Capabilities {
        // Slack takes 40,000 characters; replies are split at the 4,000 it recommends.
        max_text: super::outbound::SLACK_CHUNK,
        markup: "mrkdwn",
        edits: true,
        buttons: true,
        threads: true,
        files_in: true,
        files_out: true,
        typing: false,
    },
    prompt_hint: "You are talking on Slack: keep formatting simple (short paragraphs, plain lists, code in backticks); tables do not render.",
    admit: Admit::Allowlist { pairing: true },
    access,
    configured: |c| section(c).is_some_and(|s| s.bot_token.is_some()),
    how_to_enable: "set slack.bot_token (and slack.app_token for Socket Mode), or HERALD_SLACK__BOT_TOKEN",
    person_id: is_user_id,
    target: Some(target),
    edit_interval: |_| Some(super::outbound::EDIT_INTERVAL),
    dm_by_person_id: false,
    thread_is_chat: false,
    files: Some(FileAuth {
        token: |c| section(c).and_then(|s| s.bot_token),
        hosts: file_hosts,
        link: None,
    }),
    section: Some(Section {
        name: "slack",
        check,
        defaults: || {
            serde_json::to_value(super::config::SlackConfig::default())
                .expect("the slack section serializes")
        },
    }),
};

/// The `[slack]` section, when there is one that reads (`check` reported it otherwise).
pub fn section(c: &Config) -> Option<SlackConfig> {
    c.section::<SlackConfig>("slack").ok().flatten()
}

/// Where people's files are fetched from with the bot token: Slack's file host, and the
/// `api_url` host (a proxy, or the test fake, serves them there).
fn file_hosts(c: &Config) -> Vec<String> {
    let mut hosts = vec!["files.slack.com".to_string()];
    if let Some(url) = section(c).map(|s| s.api_url.url().clone()) {
        if let Some(host) = url.host_str() {
            hosts.push(match url.port() {
                Some(port) => format!("{host}:{port}"),
                None => host.to_string(),
            });
        }
    }
    hosts
}

fn access(c: &Config) -> Access {
    let s = section(c).unwrap_or_default();
    Access {
        all: s.allow_all_users,
        users: s.allowed_users,
        roles: Vec::new(),
    }
}

/// Reads the section and names the key at fault (an unset token is not an error: Slack is
/// then off).
fn check(c: &Config) -> Result<(), ConfigError> {
    let Some(s) = c.section::<SlackConfig>("slack")? else {
        return Ok(());
    };
    if s.bot_token.is_none() {
        return Ok(());
    }
    s.check().map_err(|e| ConfigError::Invalid(e.to_string()))
}

/// Slack's pace: chat.postMessage allows about one message a second in a channel ("short
/// bursts" above it); chat.update is a Tier 3 method, about 50 a minute.
pub fn limits() -> Limits {
    let channel = Bucket {
        every: Duration::from_secs(1),
        burst: 3,
    };
    Limits {
        private: channel,
        group: channel,
        overall: None,
        overall_edits: Some(Window {
            max: 50,
            per: Duration::from_secs(60),
        }),
        is_group: |_| false,
    }
}

/// `slack:<channel>[:<thread_ts>]`: a conversation id (`C…`, `G…`, `D…`) and a message ts.
fn target(rest: &str) -> Result<(String, Option<String>), String> {
    let (channel, thread) = split_chat_thread(rest)?;
    let id_ok = channel.len() >= 2
        && channel.starts_with(['C', 'G', 'D'])
        && channel
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if !id_ok {
        return Err("slack channel id must be a conversation id like C0123ABCD (C, G or D, then capitals and digits)".into());
    }
    if thread.is_some_and(|t| !is_ts(t)) {
        return Err("slack thread must be a message ts like 1700000000.000100".into());
    }
    Ok((channel.to_string(), thread.map(str::to_string)))
}

/// A user id: `U…` (or `W…` in Enterprise Grid), capitals and digits.
fn is_user_id(id: &str) -> bool {
    id.len() >= 2
        && id.starts_with(['U', 'W'])
        && id
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

fn is_ts(t: &str) -> bool {
    t.split_once('.').is_some_and(|(s, f)| {
        !s.is_empty()
            && !f.is_empty()
            && s.bytes().all(|b| b.is_ascii_digit())
            && f.bytes().all(|b| b.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use crate::domain::cron::parse_target;

    #[test]
    fn target_table() {
        let known = crate::config::Config::default().deliverable();
        let good = [
            ("slack:C0123ABCD", "slack:C0123ABCD"),
            ("slack:D42:1700000000.000100", "slack:D42:1700000000.000100"),
            (" Slack:G1 ", "slack:G1"),
        ];
        for (input, lane) in good {
            let t = parse_target(input, &known).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(t.lane_key().as_str(), lane);
        }
        let bad = [
            ("slack:", "slack channel id"),
            ("slack:#general", "slack channel id"),
            ("slack:U123", "slack channel id"),
            ("slack:C1:abc", "slack thread must be a message ts"),
            ("slack:C1:1700000000", "slack thread must be a message ts"),
            ("slack:C1:1.2:3", "too many ':'-separated parts"),
        ];
        for (input, want) in bad {
            let err = parse_target(input, &known).expect_err(input).to_string();
            assert!(err.contains(want), "{input:?}: got {err:?}");
        }
    }

    #[test]
    fn person_ids() {
        for (id, ok) in [
            ("U0123ABCD", true),
            ("W42", true),
            ("u0123", false),
            ("C0123", false),
            ("U", false),
        ] {
            assert_eq!(super::is_user_id(id), ok, "{id}");
        }
    }
}
