//! What Signal is, for the core: its limits, id syntax, allowlist and prompt hint, and the
//! `[signal]` section it owns (the platform contract's static half, `config::registry`).
//!
//! Signal has no buttons: approvals are asked in words (`lanes::question_in_words`) and
//! answered by a `yes`/`no` reply or a reaction. Edits stream answers (`editTimestamp`).

use std::time::Duration;

use super::config::{is_number, is_uuid, SignalConfig};
use super::SIGNAL;
use crate::config::{Access, Admit, Capabilities, Config, ConfigError, PlatformSpec, Section};

/// Signal's apps show a message of up to 2,000 characters inline (longer text travels as a
/// "long text" attachment); replies are split there.
pub const SIGNAL_CHUNK: usize = 2000;
/// One preview edit per message at most this often.
pub const EDIT_INTERVAL: Duration = Duration::from_millis(1000);

pub static SPEC: PlatformSpec = PlatformSpec {
    name: SIGNAL,
    caps: Capabilities {
        max_text: SIGNAL_CHUNK,
        markup: "plain",
        edits: true,
        buttons: false,
        threads: false,
        files_in: true,
        files_out: true,
        typing: true,
    },
    prompt_hint: "You are talking on Signal: plain text only (Markdown does not render); keep messages short.",
    admit: Admit::Allowlist { pairing: true },
    access,
    configured: |c| section(c).is_some_and(|s| s.wanted()),
    how_to_enable: "set signal.url (the signal-cli daemon) and signal.account, or HERALD_SIGNAL__URL and HERALD_SIGNAL__ACCOUNT",
    person_id: |id| is_number(id) || is_uuid(id),
    target: Some(target),
    edit_interval: |_| Some(EDIT_INTERVAL),
    dm_by_person_id: false,
    thread_is_chat: false,
    files: None,
    section: Some(Section {
        name: "signal",
        check,
        defaults: || {
            serde_json::to_value(SignalConfig::default()).expect("the signal section serializes")
        },
    }),
};

/// The `[signal]` section, when there is one that reads (`check` reported it otherwise).
pub fn section(c: &Config) -> Option<SignalConfig> {
    c.section::<SignalConfig>("signal").ok().flatten()
}

fn access(c: &Config) -> Access {
    let s = section(c).unwrap_or_default();
    Access {
        all: s.allow_all_users,
        users: s.allowed_users,
        roles: Vec::new(),
    }
}

/// Reads the section and names the key at fault (a section with neither `url` nor `account`
/// is not an error: Signal is then off).
fn check(c: &Config) -> Result<(), ConfigError> {
    let Some(s) = c.section::<SignalConfig>("signal")? else {
        return Ok(());
    };
    if !s.wanted() {
        return Ok(());
    }
    s.check().map_err(|e| ConfigError::Invalid(e.to_string()))
}

/// `signal:<+number | number | uuid>` or `signal:group:<id>` (signal-cli's id, or the lane's
/// URL-safe form); no threads.
fn target(rest: &str) -> Result<(String, Option<String>), String> {
    if let Some(group) = rest.strip_prefix("group:") {
        let ok = !group.is_empty()
            && group.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_')
            });
        if !ok {
            return Err(
                "signal group id must be the group's base64 id (signal-cli listGroups)".into(),
            );
        }
        // signal-cli's standard base64 is turned into the lane's URL-safe form; that form
        // does not decode as standard base64 and is kept as it is.
        return Ok((super::ids::group_chat(group), None));
    }
    let person = if rest.bytes().all(|b| b.is_ascii_digit()) {
        format!("+{rest}")
    } else {
        rest.to_string()
    };
    if !is_number(&person) && !is_uuid(&person) {
        return Err(
            "signal target must be a number (+4915…), an account uuid or group:<id>".into(),
        );
    }
    Ok((super::ids::dm_chat(&person), None))
}

#[cfg(test)]
mod tests {
    use crate::domain::cron::parse_target;

    #[test]
    fn target_table() {
        let known = crate::config::Config::default().deliverable();
        let uuid = "5e1a0000-0000-4000-8000-000000000001";
        let good = [
            ("signal:+4915123456789", "signal:4915123456789".to_string()),
            ("signal:4915123456789", "signal:4915123456789".to_string()),
            (&*format!("signal:{uuid}"), format!("signal:{uuid}")),
            (
                "signal:group:Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI=",
                "signal:group:Pmpi-EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI".to_string(),
            ),
            (
                "signal:group:Pmpi-EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI",
                "signal:group:Pmpi-EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI".to_string(),
            ),
        ];
        for (input, lane) in good {
            let t = parse_target(input, &known).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(t.lane_key().as_str(), lane);
        }
        let bad = [
            ("signal:", "signal target must be"),
            ("signal:alice", "signal target must be"),
            ("signal:+49", "signal target must be"),
            ("signal:group:", "signal group id"),
            ("signal:group:a b", "signal group id"),
        ];
        for (input, want) in bad {
            let err = parse_target(input, &known).expect_err(input).to_string();
            assert!(err.contains(want), "{input:?}: got {err:?}");
        }
    }

    #[test]
    fn person_ids() {
        for (id, ok) in [
            ("+4915123456789", true),
            ("5e1a0000-0000-4000-8000-000000000001", true),
            ("4915123456789", false),
            ("alice", false),
        ] {
            assert_eq!((super::SPEC.person_id)(id), ok, "{id}");
        }
    }
}
