//! What WhatsApp is, for the core: its limits, id syntax, allowlist, pace and prompt hint, and
//! the `[whatsapp]` section it owns (the platform contract's static half, `config::registry`).

use std::time::Duration;

use super::config::{wa_id, WhatsAppConfig};
use super::WHATSAPP;
use crate::config::{
    Access, Admit, Capabilities, Config, ConfigError, FileAuth, PlatformSpec, Section,
};
use crate::delivery::pace::{Bucket, Limits, Window};
use crate::domain::cron::split_chat_thread;

/// WhatsApp's longest text message body.
pub const MAX_TEXT: usize = 4096;

pub static SPEC: PlatformSpec = PlatformSpec {
    name: WHATSAPP,
    caps: Capabilities {
        max_text: MAX_TEXT,
        markup: "whatsapp",
        // WhatsApp has no edits: a streamed answer arrives whole.
        edits: false,
        buttons: true,
        threads: false,
        files_in: true,
        files_out: true,
        typing: true,
    },
    prompt_hint: "You are talking on WhatsApp: keep formatting simple (*bold*, _italic_, short lists); no tables, no headings, no links in Markdown syntax.",
    admit: Admit::Allowlist { pairing: true },
    access,
    configured: |c| section(c).is_some_and(|s| s.access_token.is_some()),
    how_to_enable: "set whatsapp.access_token, phone_number_id, app_secret and verify_token (or HERALD_WHATSAPP__ACCESS_TOKEN, …)",
    person_id: is_wa_id,
    target: Some(target),
    edit_interval: |_| None,
    // A person's chat is their number: no conversation to open first.
    dm_by_person_id: true,
    thread_is_chat: false,
    files: Some(FileAuth {
        token: |c| section(c).and_then(|s| s.access_token),
        hosts: file_hosts,
        link: Some("url"),
    }),
    section: Some(Section {
        name: "whatsapp",
        check,
        defaults: || {
            serde_json::to_value(WhatsAppConfig::default()).expect("the whatsapp section serializes")
        },
    }),
};

/// The `[whatsapp]` section, when there is one that reads (`check` reported it otherwise).
pub fn section(c: &Config) -> Option<WhatsAppConfig> {
    c.section::<WhatsAppConfig>("whatsapp").ok().flatten()
}

/// Where media is fetched with the token: the Graph API host (`GET /{media-id}` names the
/// download URL) and Meta's media host it points to.
fn file_hosts(c: &Config) -> Vec<String> {
    let mut hosts = vec!["lookaside.fbsbx.com".to_string()];
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
        users: s.allowed_ids(),
        roles: Vec::new(),
    }
}

/// Reads the section and names the key at fault (an unset token is not an error: WhatsApp is
/// then off).
fn check(c: &Config) -> Result<(), ConfigError> {
    let Some(s) = c.section::<WhatsAppConfig>("whatsapp")? else {
        return Ok(());
    };
    if s.access_token.is_none() {
        return Ok(());
    }
    s.check().map_err(|e| ConfigError::Invalid(e.to_string()))
}

/// Meta's published limits: 80 messages a second per business number; to one person one
/// message every 6 seconds in the long run, with bursts of up to 45 in 6 seconds (error 131056
/// past it, which the sender honours as a wait). A chat is paced at one a second with a burst
/// of 6: a long answer's chunks follow each other without the long-run pause, and a
/// conversation stays far inside the burst Meta allows.
pub fn limits() -> Limits {
    let person = Bucket {
        every: Duration::from_secs(1),
        burst: 6,
    };
    Limits {
        private: person,
        group: person,
        overall: Some(Window {
            max: 80,
            per: Duration::from_secs(1),
        }),
        overall_edits: None,
        is_group: |_| false,
    }
}

/// `whatsapp:<wa id>`: a person's number as WhatsApp writes it (digits, no `+`); a leading `+`
/// is accepted and dropped. No threads.
fn target(rest: &str) -> Result<(String, Option<String>), String> {
    let (chat, thread) = split_chat_thread(rest)?;
    if thread.is_some() {
        return Err("whatsapp has no threads: the target is whatsapp:<number>".into());
    }
    let plus = if chat.starts_with('+') {
        chat.to_string()
    } else {
        format!("+{chat}")
    };
    wa_id(&plus)
        .filter(|id| id == chat.trim_start_matches('+'))
        .map(|id| (id, None))
        .ok_or_else(|| {
            "whatsapp target must be a number in international form like 4915112345678".into()
        })
}

/// A WhatsApp id: the E.164 digits without `+`.
fn is_wa_id(id: &str) -> bool {
    wa_id(&format!("+{id}")).is_some_and(|w| w == id)
}

#[cfg(test)]
mod tests {
    use crate::domain::cron::parse_target;

    #[test]
    fn target_table() {
        let known = crate::config::Config::default().deliverable();
        let good = [
            ("whatsapp:4915112345678", "whatsapp:4915112345678"),
            ("whatsapp:+4915112345678", "whatsapp:4915112345678"),
        ];
        for (input, lane) in good {
            let t = parse_target(input, &known).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(t.lane_key().as_str(), lane);
        }
        let bad = [
            ("whatsapp:", "international form"),
            ("whatsapp:0151123", "international form"),
            ("whatsapp:49 151", "international form"),
            ("whatsapp:4915112345678:1", "no threads"),
        ];
        for (input, want) in bad {
            let err = parse_target(input, &known).expect_err(input).to_string();
            assert!(err.contains(want), "{input:?}: got {err:?}");
        }
    }

    #[test]
    fn person_ids() {
        for (id, ok) in [
            ("4915112345678", true),
            ("+4915112345678", false),
            ("0151", false),
            ("abc", false),
        ] {
            assert_eq!(super::is_wa_id(id), ok, "{id}");
        }
    }
}
