//! What Matrix is, for the core: its limits, id syntax, allowlist, pace and prompt hint, and
//! the `[matrix]` section it owns (the platform contract's static half, `config::registry`).
//!
//! Matrix has no buttons: approval questions go out in words and are answered by a reply or a
//! reaction (`lanes::approvals::words`). Room ids hold a `:` (`!abc:example.org`), so a
//! delivery target's thread is told apart by its `$` sigil: `matrix:!abc:example.org:$event`.

use std::time::Duration;

use super::config::{is_event_id, is_room_id, is_user_id, MatrixConfig};
use super::MATRIX;
use crate::config::{Access, Admit, Capabilities, Config, ConfigError, PlatformSpec, Section};
use crate::delivery::pace::{Bucket, Limits};

pub static SPEC: PlatformSpec = PlatformSpec {
    name: MATRIX,
    caps: Capabilities {
        max_text: super::outbound::MATRIX_CHUNK,
        markup: "markdown",
        edits: true,
        buttons: false,
        threads: true,
        files_in: true,
        files_out: true,
        typing: true,
    },
    prompt_hint: "You are talking on Matrix: Markdown renders (bold, lists, code blocks, links); keep messages readable in a chat.",
    admit: Admit::Allowlist { pairing: true },
    access,
    configured: |c| section(c).is_some_and(|s| s.user_id.is_some()),
    how_to_enable: "set matrix.homeserver_url, matrix.user_id and matrix.access_token or matrix.password (or HERALD_MATRIX__…)",
    person_id: is_user_id,
    target: Some(target),
    edit_interval: |_| Some(super::outbound::EDIT_INTERVAL),
    dm_by_person_id: false,
    thread_is_chat: false,
    files: None,
    section: Some(Section {
        name: "matrix",
        check,
        defaults: || {
            serde_json::to_value(MatrixConfig::default()).expect("the matrix section serializes")
        },
    }),
};

/// The `[matrix]` section, when there is one that reads (`check` reported it otherwise).
pub fn section(c: &Config) -> Option<MatrixConfig> {
    c.section::<MatrixConfig>("matrix").ok().flatten()
}

fn access(c: &Config) -> Access {
    let s = section(c).unwrap_or_default();
    Access {
        all: s.allow_all_users,
        users: s.allowed_users,
        roles: Vec::new(),
    }
}

/// Reads the section and names the key at fault (no `user_id`: Matrix is off).
fn check(c: &Config) -> Result<(), ConfigError> {
    let Some(s) = c.section::<MatrixConfig>("matrix")? else {
        return Ok(());
    };
    if s.user_id.is_none() {
        return Ok(());
    }
    s.check().map_err(|e| ConfigError::Invalid(e.to_string()))
}

/// Synapse's default message limit is about 0.2 a second with a burst of 10 per user; a
/// homeserver's operator sets it, so the pace is one a second per room with a burst of 5, and
/// a 429 (`M_LIMIT_EXCEEDED`) is honoured on top of it.
pub fn limits() -> Limits {
    let room = Bucket {
        every: Duration::from_secs(1),
        burst: 5,
    };
    Limits {
        private: room,
        group: room,
        overall: None,
        overall_edits: None,
        is_group: |_| false,
    }
}

/// `matrix:<room id>[:<thread root event id>]`: `!opaque:server`, then `$event`.
fn target(rest: &str) -> Result<(String, Option<String>), String> {
    let (room, thread) = match rest.find(":$") {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    if !is_room_id(room) {
        return Err("matrix room must be a room id like !abc:example.org (not an #alias)".into());
    }
    if thread.is_some_and(|t| !is_event_id(t)) {
        return Err("matrix thread must be the thread root's event id like $abc".into());
    }
    Ok((room.to_string(), thread.map(str::to_string)))
}

#[cfg(test)]
mod tests {
    use crate::domain::cron::parse_target;
    use crate::domain::LaneKey;

    #[test]
    fn target_table() {
        let known = crate::config::Config::default().deliverable();
        let good = [
            ("matrix:!abc:example.org", "!abc:example.org", None),
            (
                "matrix:!abc:hs.org:8448:$root_1",
                "!abc:hs.org:8448",
                Some("$root_1"),
            ),
        ];
        for (input, room, thread) in good {
            let t = parse_target(input, &known).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(
                t.lane_key(),
                LaneKey::from_parts("matrix", room, thread),
                "{input}"
            );
        }
        let bad = [
            ("matrix:", "matrix room must be a room id"),
            ("matrix:#room:example.org", "matrix room must be a room id"),
            ("matrix:@alice:example.org", "matrix room must be a room id"),
            ("matrix:!abc:hs:$", "matrix thread must be"),
        ];
        for (input, want) in bad {
            let err = parse_target(input, &known).expect_err(input).to_string();
            assert!(err.contains(want), "{input:?}: got {err:?}");
        }
    }
}
