//! Why a memory edit was refused. The `Display` text is what the model reads (it is told to
//! fix the call and try again); the variants are what code and tests check.

use crate::screen::Finding;

#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("memory belongs to a person, and this turn (a scheduled run) has none; nothing saved")]
    NoPerson,
    #[error("arguments are not valid for memory: {0}")]
    BadArguments(String),
    #[error("target {0:?} is not \"memory\" or \"user\"")]
    UnknownTarget(String),
    #[error("action {0:?} is not \"add\", \"replace\" or \"remove\"")]
    UnknownAction(String),
    #[error("{field} is required for {action}")]
    Missing { field: &'static str, action: String },
    #[error("memory is not available for this sender")]
    Unavailable,
    #[error(
        "{file} is larger than Herald reads; an operator must trim it (herald memory edit {person})"
    )]
    Oversized { file: &'static str, person: String },
    #[error("that entry is already saved; nothing changed")]
    Duplicate,
    #[error("the new text is already saved as another entry; remove this one instead")]
    DuplicateOther,
    #[error(
        "{file} would hold {total} of at most {cap} characters. Consolidate first: replace \
         several related entries with one shorter entry, or remove ones that no longer matter, \
         then try again"
    )]
    Full {
        file: &'static str,
        total: usize,
        cap: usize,
    },
    #[error("the memory file could not be written ({0})")]
    Write(#[source] std::io::Error),
    #[error("content is empty")]
    Empty,
    #[error("an entry is one line; save separate facts as separate entries")]
    MultiLine,
    #[error(
        "refused: the entry holds control characters, line or paragraph separators or \
         undecodable bytes; save plain text on one line"
    )]
    NotText,
    #[error("an entry cannot start with '#' (that marks a heading)")]
    Heading,
    #[error("the entry has {chars} characters; keep one entry under {max} characters")]
    TooLong { chars: usize, max: usize },
    #[error(
        "refused: the entry contains {0}; memory enters future system prompts, so it may not \
         hold instructions to the agent, hidden characters or credentials"
    )]
    Screened(Finding),
    #[error("old_text is required: a unique part of the entry to change")]
    NoOldText,
    #[error("no saved entry contains old_text")]
    NoMatch,
    #[error("old_text matches {0} entries; quote more of the one you mean")]
    Ambiguous(usize),
}
