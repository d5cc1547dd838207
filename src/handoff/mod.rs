//! Handoff capsules: the pure logic of closing a stretch of conversation into a short note
//! that the next session of the same lane receives once.
//!
//! Here live the trigger rules, the writer's input and prompt, validation of its reply, the
//! middle-cut trim to the 12,000-character cap, the confidential scrub, the Recovery footer,
//! the degraded fallback and the injection label: pure functions, no store, no network, no
//! clock. Four modules wire them into the daemon: `hook` (the pre-dispatch trigger),
//! `builder` (the background build that stores the capsule and rotates the session),
//! `nightly` (the scheduled closer of idle conversations, through the same builder) and
//! `inject` (the pre-LLM hook that hands the capsule to the next session once); `switch` writes
//! the capsule `/agent` carries to the new agent.

mod builder;
mod capsule;
mod dialogue;
mod hook;
mod inject;
mod nightly;
mod prompt;
mod scrub;
mod switch;
mod trigger;
mod trim;

pub use builder::{BuildJob, BuildReport, Builder, Trigger};
pub use hook::{is_handoff_request, HandoffHook, ACK, ALREADY};
pub use inject::HandoffInject;
pub use nightly::{NightlyCloser, NightlyRules, PassKind, PassReport, CATCH_UP, NIGHTLY_LEASE};

pub use capsule::{
    assemble, fallback_capsule, recovery_section, recovery_section_read, strip_recovery,
    validate_writer_output, word_count, BuildStatus, InvalidCapsule, TranscriptLine, CAP_CHARS,
    CONFIDENTIAL_WORDS, MIN_CAPSULE_CHARS, MIN_HEADINGS, MIN_MESSAGES, PENDING_MAX_AGE_HOURS,
    RECOVERY_RESERVE_CHARS, SECTIONS, WORDS, WRITER_INPUT_CHARS,
};
pub use prompt::{dialogue_count, injection_text, writer_input, writer_input_count, writer_prompt};
pub use scrub::scrub_confidential;
pub use trigger::{is_handoff_word, is_wrapup_command};
pub use trim::{trim_capsule, trim_marker};
