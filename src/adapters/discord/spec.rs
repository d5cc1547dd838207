//! What Discord is, for the core: its limits, id syntax, allowlist (users and roles) and
//! prompt hint (the platform contract's static half, `config::registry`).

use std::time::Duration;

use super::DISCORD;
use crate::config::{Access, Admit, Capabilities, Config, PlatformSpec};
use crate::domain::cron::split_chat_thread;

pub static SPEC: PlatformSpec = PlatformSpec {
    name: DISCORD,
    caps: Capabilities {
        max_text: 2000,
        markup: "markdown",
        edits: true,
        buttons: true,
        threads: true,
        files_in: true,
        files_out: true,
        typing: true,
    },
    prompt_hint: "You are talking on Discord: Markdown renders; keep messages concise.",
    admit: Admit::Allowlist { pairing: true },
    access,
    configured: |c| c.discord.token.is_some(),
    how_to_enable: "set discord.token or DISCORD_BOT_TOKEN",
    person_id: |id| crate::adapters::telegram::spec::is_integer(id, false),
    target: Some(target),
    edit_interval: |c| {
        c.streaming
            .discord_edit_interval_ms
            .map(Duration::from_millis)
    },
    dm_by_person_id: false,
    thread_is_chat: true,
    files: None,
    section: None,
};

fn access(c: &Config) -> Access {
    Access {
        all: c.discord.allow_all_users,
        users: c.discord.allowed_users.clone(),
        roles: c.discord.allowed_roles.clone(),
    }
}

/// `discord:<channel>[:<thread>]`, both snowflakes.
fn target(rest: &str) -> Result<(String, Option<String>), String> {
    use crate::adapters::telegram::spec::is_integer;
    let (channel, thread) = split_chat_thread(rest)?;
    if !is_integer(channel, false) {
        return Err("discord channel id must be a number (a snowflake)".into());
    }
    if thread.is_some_and(|t| !is_integer(t, false)) {
        return Err("discord thread id must be a number (a snowflake)".into());
    }
    Ok((channel.to_string(), thread.map(str::to_string)))
}

#[cfg(test)]
mod tests {
    use crate::domain::cron::parse_target;

    #[test]
    fn target_table() {
        let known = crate::config::Config::default().deliverable();
        let t = parse_target("discord:111:222", &known).unwrap();
        assert_eq!(t.lane_key().as_str(), "discord:111:222");
        for (input, want) in [
            ("discord:-123", "discord channel id must be a number"),
            ("discord:general", "discord channel id must be a number"),
            (
                "discord:99999999999999999999",
                "discord channel id must be a number",
            ),
            ("discord:1:x", "discord thread id must be a number"),
        ] {
            let err = parse_target(input, &known).expect_err(input).to_string();
            assert!(err.contains(want), "{input:?}: got {err:?}");
        }
    }
}
