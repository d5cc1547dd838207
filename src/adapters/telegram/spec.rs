//! What Telegram is, for the core: its limits, id syntax, allowlist and prompt hint (the
//! platform contract's static half, `config::registry`).

use std::time::Duration;

use super::TELEGRAM;
use crate::config::{Access, Admit, Capabilities, Config, PlatformSpec};
use crate::domain::cron::split_chat_thread;

pub static SPEC: PlatformSpec = PlatformSpec {
    name: TELEGRAM,
    caps: Capabilities {
        max_text: 4096,
        markup: "telegram-html",
        edits: true,
        buttons: true,
        threads: true,
        files_in: true,
        files_out: true,
        typing: true,
    },
    prompt_hint: "You are talking on Telegram: keep formatting simple (short paragraphs, plain lists, code in backticks).",
    admit: Admit::Allowlist { pairing: true },
    access,
    configured: |c| c.telegram.token.is_some(),
    how_to_enable: "set telegram.token or TELEGRAM_BOT_TOKEN",
    person_id: |id| is_integer(id, false),
    target: Some(target),
    edit_interval: |c| c.streaming.telegram_edit_interval_ms.map(Duration::from_millis),
    dm_by_person_id: true,
    thread_is_chat: false,
    files: None,
    section: None,
};

fn access(c: &Config) -> Access {
    Access {
        all: c.telegram.allow_all_users,
        users: c.telegram.allowed_users.clone(),
        roles: Vec::new(),
    }
}

/// `telegram:<chat>[:<topic>]`: the chat a number (negative for groups and channels), the
/// forum topic a positive one.
fn target(rest: &str) -> Result<(String, Option<String>), String> {
    let (chat, thread) = split_chat_thread(rest)?;
    if !is_integer(chat, true) {
        return Err("telegram chat id must be a number (negative for groups and channels)".into());
    }
    if thread.is_some_and(|t| !is_integer(t, false)) {
        return Err("telegram topic (thread) id must be a positive number".into());
    }
    Ok((chat.to_string(), thread.map(str::to_string)))
}

/// A decimal id that fits in 64 bits; zero is never a real chat, channel or topic.
pub(crate) fn is_integer(s: &str, allow_negative: bool) -> bool {
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

#[cfg(test)]
mod tests {
    use crate::domain::cron::parse_target;

    #[test]
    fn target_table() {
        let known = crate::config::Config::default().deliverable();
        let good = [
            ("telegram:12345", "telegram:12345"),
            ("telegram:-1001234567890:7", "telegram:-1001234567890:7"),
            (" Telegram:42 ", "telegram:42"),
        ];
        for (input, lane) in good {
            let t = parse_target(input, &known).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(t.lane_key().as_str(), lane);
        }
        let bad = [
            ("telegram:", "telegram chat id must be a number"),
            ("telegram:@mychannel", "telegram chat id must be a number"),
            ("telegram:0", "telegram chat id must be a number"),
            (
                "telegram:-100:",
                "telegram topic (thread) id must be a positive number",
            ),
            (
                "telegram:-100:-5",
                "telegram topic (thread) id must be a positive number",
            ),
            ("telegram:1:2:3", "too many ':'-separated parts"),
        ];
        for (input, want) in bad {
            let err = parse_target(input, &known).expect_err(input).to_string();
            assert!(err.contains(want), "{input:?}: got {err:?}");
        }
    }
}
