//! What email is, for the core: its capabilities, id syntax, allowlist and prompt hint, and the
//! `[email]` section it owns (the platform contract's static half, `config::registry`).
//!
//! A person is their address (`email:alice@example.org`); a delivery target is an address, and
//! optionally the Message-ID of the thread to continue (`email:alice@example.org:<id>`). A
//! Message-ID may itself hold ':', so the target is cut at its first ':' only.

use super::config::{is_address, is_sender_entry, EmailConfig};
use super::EMAIL;
use crate::config::{Access, Admit, Capabilities, Config, ConfigError, PlatformSpec, Section};

pub static SPEC: PlatformSpec = PlatformSpec {
    name: EMAIL,
    caps: Capabilities {
        // A reply is one mail, however long.
        max_text: usize::MAX,
        markup: "markdown",
        edits: false,
        buttons: false,
        threads: true,
        files_in: true,
        files_out: true,
        typing: false,
    },
    prompt_hint: "You are answering by email: write a complete reply in plain paragraphs (simple Markdown renders); no greeting line or signature is needed.",
    admit: Admit::Allowlist { pairing: true },
    access,
    configured: |c| section(c).is_some_and(|s| s.address.is_some()),
    how_to_enable: "set email.address, the servers and the password (or HERALD_EMAIL__ADDRESS, …)",
    person_id: |id| is_address(id) && id == id.trim().to_lowercase(),
    target: Some(target),
    edit_interval: |_| None,
    dm_by_person_id: true,
    thread_is_chat: false,
    files: None,
    section: Some(Section {
        name: "email",
        check,
        defaults: || {
            serde_json::to_value(EmailConfig::default()).expect("the email section serializes")
        },
    }),
};

/// The `[email]` section, when there is one that reads (`check` reported it otherwise).
pub fn section(c: &Config) -> Option<EmailConfig> {
    c.section::<EmailConfig>("email").ok().flatten()
}

/// Addresses are people; `@domain` entries are matched against the sender's domain, which the
/// reader gives each message as its one role.
fn access(c: &Config) -> Access {
    let s = section(c).unwrap_or_default();
    let (domains, users): (Vec<String>, Vec<String>) = s
        .allowed_senders
        .iter()
        .map(|e| e.trim().to_lowercase())
        .partition(|e| e.starts_with('@'));
    Access {
        all: false,
        users,
        roles: domains,
    }
}

fn check(c: &Config) -> Result<(), ConfigError> {
    let Some(s) = c.section::<EmailConfig>("email")? else {
        return Ok(());
    };
    if s.address.is_none() {
        return Ok(());
    }
    s.check().map_err(|e| ConfigError::Invalid(e.to_string()))
}

/// `email:<address>[:<thread root Message-ID>]`.
fn target(rest: &str) -> Result<(String, Option<String>), String> {
    let (address, thread) = match rest.split_once(':') {
        Some((a, t)) => (a, Some(t)),
        None => (rest, None),
    };
    let address = address.trim().to_lowercase();
    if !is_address(&address) || address.starts_with('@') || !is_sender_entry(&address) {
        return Err("email target must be an address like alice@example.org".into());
    }
    let thread = thread.map(|t| {
        t.trim()
            .trim_start_matches('<')
            .trim_end_matches('>')
            .to_string()
    });
    if thread.as_deref().is_some_and(str::is_empty) {
        return Err("email thread must be a Message-ID after the address".into());
    }
    Ok((address, thread))
}

#[cfg(test)]
mod tests {
    use crate::domain::cron::parse_target;
    use crate::domain::LaneKey;

    #[test]
    fn target_table() {
        let known = crate::config::Config::default().deliverable();
        let good = [
            ("email:alice@example.org", "email:alice@example.org"),
            ("email:Alice@Example.org", "email:alice@example.org"),
            (
                "email:alice@example.org:<a:b@x>",
                "email:alice@example.org:a:b@x",
            ),
        ];
        for (input, lane) in good {
            let t = parse_target(input, &known).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(t.lane_key(), LaneKey::new(lane), "{input}");
        }
        for bad in [
            "email:",
            "email:alice",
            "email:@example.org",
            "email:alice@example.org:",
        ] {
            let err = parse_target(bad, &known).expect_err(bad).to_string();
            assert!(err.contains("email"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn people_are_lower_case_addresses() {
        for (id, ok) in [
            ("alice@example.org", true),
            ("Alice@example.org", false),
            ("alice", false),
        ] {
            assert_eq!((super::SPEC.person_id)(id), ok, "{id}");
        }
    }
}
