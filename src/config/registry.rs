//! The platform contract's static half: the facts each platform declares about itself, read
//! by the core instead of matching on a platform's name.
//!
//! An adapter module exports one [`PlatformSpec`] and `adapters::PLATFORMS` lists it; that list
//! is the only place that names every platform. Auth and pairing, cron targets and access,
//! pacing, previews, prompt hints and approvals ask [`spec`] for what they need, so a new
//! platform is a new module and one line there. The sending half is `delivery::Outbound`, the
//! receiving half `adapters::Adapter`.
//!
//! Facts live at the config layer because most depend on the deployment (an allowlist, a
//! token that turns the adapter on), and a platform's own config section is declared here too:
//! `Config` keeps the tables it does not know, and the owning adapter reads its own with
//! [`Config::section`].

use std::time::Duration;

use serde::de::DeserializeOwned;

use super::{Config, ConfigError};
use crate::domain::cron::{Deliverable, DeliverablePlatform, TargetSyntax};
use crate::domain::{MessageEvent, Platform};

/// What one platform is, for the core.
pub struct PlatformSpec {
    pub name: Platform,
    pub caps: Capabilities,
    /// One sentence for the system prompt: how replies read there.
    pub prompt_hint: &'static str,
    pub admit: Admit,
    /// The allowlist the auth hook checks for [`Admit::Allowlist`].
    pub access: fn(&Config) -> Access,
    /// The adapter runs in this deployment (a token is set, the web chat is on).
    pub configured: fn(&Config) -> bool,
    /// What to set to turn it on, for errors that need it on.
    pub how_to_enable: &'static str,
    /// Whether `id` can be a person's id here (`telegram:` takes numbers): an identity in the
    /// config (`approvals.admins`, `[[people]]`) that cannot is a typo to refuse at load.
    pub person_id: fn(&str) -> bool,
    /// How a delivery target's `chat[:thread]` is spelled; `None`: nothing is delivered there.
    pub target: Option<TargetSyntax>,
    /// The pace of live-preview edits of one message, when the deployment sets one for this
    /// platform (`streaming.edit_interval_ms` otherwise).
    pub edit_interval: fn(&Config) -> Option<Duration>,
    /// A person's private chat is addressed by their own id (Telegram's user id is their
    /// private chat; Discord and Slack open a DM channel first). Budget approvers are asked
    /// there.
    pub dm_by_person_id: bool,
    /// A button pressed in a thread reports the thread as its chat (Discord threads are
    /// channels), so a press there still belongs to the question asked in the thread.
    pub thread_is_chat: bool,
    /// Files people send that are fetched with the platform's token (`MediaSource::Authorized`).
    pub files: Option<FileAuth>,
    /// The config table this platform owns (`[slack]`), when it is not one of the core's.
    pub section: Option<Section>,
}

/// What a platform can carry; the suite in `tests/it/conformance` holds each adapter to it.
#[derive(Debug, Clone, Copy)]
pub struct Capabilities {
    /// Longest text of one message; longer replies are split.
    pub max_text: usize,
    /// The markup replies are rendered in (`telegram-html`, `markdown`, `mrkdwn`, `plain`).
    pub markup: &'static str,
    /// Messages can be edited (live previews of a streamed answer).
    pub edits: bool,
    /// Buttons (approval questions).
    pub buttons: bool,
    /// Threads are conversations of their own.
    pub threads: bool,
    pub files_in: bool,
    pub files_out: bool,
    pub typing: bool,
}

/// How the auth hook lets a sender in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// By id from the platform's allowlist ([`PlatformSpec::access`]); with `pairing`, an
    /// unknown sender in a private chat is offered a pairing code.
    Allowlist { pairing: bool },
    /// The local web chat: the loopback caller, or any caller when the bearer token is set
    /// (the HTTP layer checked it).
    Local,
    /// Written only by routes that checked an API key.
    Keyed,
    /// Never a person (scheduled runs).
    Never,
}

/// A platform's allowlist.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Everyone (warned about at start).
    pub all: bool,
    pub users: Vec<String>,
    /// Roles whose members are let in (only a message carries a sender's roles).
    pub roles: Vec<String>,
}

/// The token a platform's files are fetched with, and the only hosts it is sent to (with a
/// port for a local server or a test fake: `127.0.0.1:8081`).
pub struct FileAuth {
    pub token: fn(&Config) -> Option<super::Secret>,
    pub hosts: fn(&Config) -> Vec<String>,
    /// The file's URL answers JSON whose field of this name is the download URL (WhatsApp's
    /// `GET /{media-id}` names a short-lived `url`); `None`: the URL serves the bytes.
    pub link: Option<&'static str>,
}

/// A config table a platform owns, and its check at load.
pub struct Section {
    pub name: &'static str,
    /// Reads the table (when present) and names the key at fault.
    pub check: fn(&Config) -> Result<(), ConfigError>,
    /// The table's defaults as `Config` serializes them (the example file and the docs are
    /// checked against them).
    pub defaults: fn() -> serde_json::Value,
}

/// Every platform this binary knows.
pub fn specs() -> &'static [&'static PlatformSpec] {
    crate::PLATFORMS
}

/// What `p` declares; `None` for a name this binary does not run (a row from a newer
/// release, a typo in a config).
pub fn spec(p: Platform) -> Option<&'static PlatformSpec> {
    specs().iter().copied().find(|s| s.name == p)
}

/// Whether the platform of `ev` lets people in by allowlist (and so has senders to pair).
pub fn by_allowlist(p: Platform) -> bool {
    spec(p).is_some_and(|s| matches!(s.admit, Admit::Allowlist { .. }))
}

/// The platform's one-sentence prompt hint; empty for an unknown one.
pub fn prompt_hint(ev: &MessageEvent) -> &'static str {
    spec(ev.platform).map_or("", |s| s.prompt_hint)
}

impl Config {
    /// The platforms a cron job or `send_message` may name, with their id rules and whether
    /// each is configured here.
    pub fn deliverable(&self) -> Deliverable {
        Deliverable {
            platforms: specs()
                .iter()
                .filter_map(|s| {
                    Some(DeliverablePlatform {
                        platform: s.name,
                        syntax: s.target?,
                        configured: (s.configured)(self),
                        how_to_enable: s.how_to_enable,
                    })
                })
                .collect(),
        }
    }

    /// Platforms this deployment can deliver to.
    pub fn delivery_platforms(&self) -> Vec<Platform> {
        self.deliverable().configured()
    }

    /// The pace of preview edits in one chat of `p`: the platform's own setting, else
    /// `streaming.edit_interval_ms`.
    pub fn edit_interval(&self, p: Platform) -> Duration {
        spec(p)
            .and_then(|s| (s.edit_interval)(self))
            .unwrap_or(Duration::from_millis(self.streaming.edit_interval_ms))
    }

    /// A platform's own table (`[slack]`), with `HERALD_SLACK__…` applied; `None` when the
    /// file and the environment have none.
    pub fn section<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, ConfigError> {
        let Some(value) = self.sections.get(name) else {
            return Ok(None);
        };
        value
            .deserialize::<T>()
            .map(Some)
            .map_err(|e| ConfigError::Invalid(format!("[{name}]: {e}")))
    }
}

/// Every table that is not a core section belongs to a platform, and reads as its owner
/// expects; anything else is a typo the operator must hear about.
pub(super) fn check_sections(c: &Config) -> Result<(), ConfigError> {
    for name in c.sections.keys() {
        let owner = specs()
            .iter()
            .find_map(|s| s.section.as_ref().filter(|sec| sec.name == name.as_str()));
        let Some(section) = owner else {
            return Err(ConfigError::Invalid(format!(
                "unknown section [{name}] (platform sections: {})",
                specs()
                    .iter()
                    .filter_map(|s| s.section.as_ref().map(|sec| sec.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        (section.check)(c)?;
    }
    Ok(())
}
