//! The capsule's shape: its limits, its build statuses, what counts as a valid writer reply,
//! the Recovery footer, the degraded fallback and the final assembly under the cap.
//!
//! Pure functions over text. The store, the lane worker and the writer model call live
//! elsewhere; this module must stay free of I/O so every rule here is a table test. A fallback
//! must say it is a fallback in its first section *and* be reported as `degraded` by the
//! caller: a watchdog must not need to open the file to tell the two apart.

use super::prompt::{dialogue_tail, RECOVERY_HEADING};
use super::trim::trim_capsule;
pub use crate::domain::BuildStatus;

/// The five headings a capsule holds, in order.
pub const SECTIONS: [&str; 5] = [
    "## Working on",
    "## State",
    "## Decisions",
    "## Pointers",
    "## Next",
];
/// Hard cap on the stored capsule, in characters (Unicode scalar values).
pub const CAP_CHARS: usize = 12_000;
/// How much of the dialogue (its end) the writer model receives, in characters.
pub const WRITER_INPUT_CHARS: usize = 300_000;
/// Word budget asked of the writer.
pub const WORDS: usize = 1200;
/// Word budget asked of the writer in a confidential lane.
pub const CONFIDENTIAL_WORDS: usize = 400;
/// Fewer user/assistant messages than this is nothing worth handing off.
pub const MIN_MESSAGES: usize = 4;
/// A pending capsule older than this is deleted unread.
pub const PENDING_MAX_AGE_HOURS: i64 = 36;
/// A writer reply shorter than this is not a capsule, whatever its headings.
pub const MIN_CAPSULE_CHARS: usize = 40;
/// At least this many of [`SECTIONS`] must be present in a writer reply.
pub const MIN_HEADINGS: usize = 3;
/// Room the degraded fallback leaves for a Recovery footer, so that [`assemble`] never has to
/// cut the transcript a second time (two trim markers would misreport what was lost).
pub const RECOVERY_RESERVE_CHARS: usize = 1_000;

/// One stored message of the session being handed off. Only `user` and `assistant` lines
/// reach the writer; other roles are skipped wherever lines are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptLine {
    pub id: i64,
    pub role: String,
    pub text: String,
}

/// Why a writer reply was rejected; the caller falls back (or, when confidential, gives up).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidCapsule {
    #[error("writer reply has {chars} characters, a capsule needs at least {MIN_CAPSULE_CHARS}")]
    TooFewChars { chars: usize },
    #[error("writer reply has {found} of the 5 capsule headings, at least {MIN_HEADINGS} needed")]
    MissingHeadings { found: usize },
}

/// Accepts a writer reply that looks like a capsule and returns its cleaned body: surrounding
/// code fences and whitespace removed, headings normalised to the exact [`SECTIONS`] spelling
/// (so trimming can find them), and any `## Recovery` the model invented dropped (that footer
/// is ours to write, with a real session id).
pub fn validate_writer_output(text: &str) -> Result<String, InvalidCapsule> {
    let unfenced = strip_fences(text);
    let body = normalise_headings(strip_recovery(unfenced));
    let body = body.trim();
    let chars = body.chars().count();
    if chars < MIN_CAPSULE_CHARS {
        return Err(InvalidCapsule::TooFewChars { chars });
    }
    let found = SECTIONS
        .iter()
        .filter(|h| body.lines().any(|line| line.starts_with(*h)))
        .count();
    if found < MIN_HEADINGS {
        return Err(InvalidCapsule::MissingHeadings { found });
    }
    Ok(body.to_string())
}

fn strip_fences(text: &str) -> &str {
    let mut t = text.trim();
    if t.starts_with("```") {
        t = t.split_once('\n').map_or("", |(_, rest)| rest);
    }
    if let Some(inner) = t.trim_end().strip_suffix("```") {
        t = inner;
    }
    t.trim()
}

fn normalise_headings(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let lead = line.trim_start();
        let canonical = SECTIONS.iter().find(|h| {
            lead.get(..h.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(h))
        });
        match canonical {
            Some(h) => {
                out.push_str(h);
                out.push_str(&lead[h.len()..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The capsule without its `## Recovery` footer (the last such heading at a line start), for
/// handing an earlier capsule to the writer as context.
pub fn strip_recovery(capsule: &str) -> &str {
    let at = capsule
        .match_indices(RECOVERY_HEADING)
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || capsule.as_bytes()[i - 1] == b'\n')
        .last();
    match at {
        Some(i) => capsule[..i].trim_end(),
        None => capsule.trim_end(),
    }
}

/// The footer no model writes: which session this came from, how long it was, and the two
/// `session_search` calls that get back to it. Passing `query` with `session_id` reads the
/// session from the top instead of searching it, so the footer spells out both calls.
pub fn recovery_section(session_id: &str, message_count: usize) -> String {
    recovery_section_read(session_id, message_count, message_count)
}

/// [`recovery_section`] for a writer that read only the newest `read` of the session's
/// `message_count` messages (the writer's input is capped): the footer says how many.
pub fn recovery_section_read(session_id: &str, message_count: usize, read: usize) -> String {
    let counts = if read < message_count {
        format!(
            "{message_count} messages; the writer read the newest {read}, the older ones are \
             only in the session"
        )
    } else {
        format!("{message_count} messages")
    };
    let id: String = session_id
        .chars()
        .map(|c| if c == '"' || c.is_control() { '_' } else { c })
        .collect();
    format!(
        "{RECOVERY_HEADING}\n\
         This capsule was written from session {id} ({counts}). Tool results \
         are not in it, and detail was left out; the full session is still searchable, in two \
         separate calls:\n\
         1. Find where something was discussed: `session_search(query=\"2 to 5 keywords\")` \
         returns a session id and a matching message id.\n\
         2. Read around that message: `session_search(session_id=\"{id}\", \
         around_message_id=<message id>, role_filter=\"user,assistant,tool\")`.\n\
         Passing query together with session_id does not search the session; it reads it from \
         the top.\n"
    )
}

/// The degraded capsule: the filtered transcript under a first section that says plainly what
/// it is. Trimmed from the middle to leave room for the Recovery footer.
pub fn fallback_capsule(lines: &[TranscriptLine]) -> String {
    let transcript = dialogue_tail(lines, WRITER_INPUT_CHARS);
    let text = format!(
        "## Working on\n\
         The writer model did not return a usable handoff, so this is the filtered transcript \
         instead: the user and assistant messages of the session, oldest first, each with its \
         message id as [#N]. Read the end first; it is the latest state.\n\n\
         ## Transcript\n{transcript}\n"
    );
    trim_capsule(&text, CAP_CHARS - RECOVERY_RESERVE_CHARS)
}

/// The stored capsule: the body trimmed so that body and footer together fit [`CAP_CHARS`].
pub fn assemble(body: &str, recovery: Option<&str>) -> String {
    let body = body.trim_end();
    let Some(recovery) = recovery.map(str::trim).filter(|r| !r.is_empty()) else {
        return trim_capsule(&format!("{body}\n"), CAP_CHARS);
    };
    // A footer can only outgrow the cap through an absurd session id; keep the cap regardless.
    let recovery = trim_capsule(recovery, CAP_CHARS / 4);
    let room = CAP_CHARS - recovery.chars().count() - "\n\n\n".len();
    format!("{}\n\n{recovery}\n", trim_capsule(body, room))
}

/// Words as a person would count them: whitespace-separated runs.
pub fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

#[cfg(test)]
#[path = "capsule_tests.rs"]
mod tests;
