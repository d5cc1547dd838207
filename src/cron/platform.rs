//! Scheduled runs as a platform, for the core: their lanes (`cron:<job>`) belong to a job and
//! never to a person, they are no delivery target, and their prompt hint asks for a brief.

use crate::config::{Access, Admit, Capabilities, PlatformSpec};
use crate::domain::Platform;

pub static SPEC: PlatformSpec = PlatformSpec {
    name: Platform::CRON,
    caps: Capabilities {
        max_text: usize::MAX,
        markup: "plain",
        edits: false,
        buttons: false,
        threads: false,
        files_in: false,
        files_out: false,
        typing: false,
    },
    prompt_hint: "You are running a scheduled job; your final answer is delivered as a brief into a chat. Answer exactly [SILENT] when there is nothing worth sending.",
    admit: Admit::Never,
    access: |_| Access {
        all: false,
        users: Vec::new(),
        roles: Vec::new(),
    },
    configured: |_| false,
    how_to_enable: "",
    person_id: |_| false,
    target: None,
    edit_interval: |_| None,
    dm_by_person_id: false,
    thread_is_chat: false,
    files: None,
    section: None,
};
