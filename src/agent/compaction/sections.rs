//! The projection's sections as data: entries that can be folded from messages, rendered to
//! lines, and parsed back from an earlier projection (see `parse.rs`) so that a second
//! compaction continues the first instead of summarizing a summary.
//!
//! Rendering is the single source of the line formats; `parse.rs` must accept exactly what is
//! rendered here. Quoted parts never contain the separators ` — ` and ` → ` (see [`quote_part`]).

use std::borrow::Cow;

use super::extract::{FileAction, Outcome};
use super::sanitize::shorten;

pub const GOAL: &str = "## Goal";
pub const ERRORS: &str = "## Errors and fixes";
pub const FILES: &str = "## Files";
pub const COMMANDS: &str = "## Commands";
pub const ERROR_NAMES: &str = "## Error names";
pub const SESSION_LOG: &str = "## Session log";

/// Headings in output order; the projector's own lines are the only ones that start with `##`.
pub const HEADINGS: [&str; 6] = [GOAL, ERRORS, FILES, COMMANDS, ERROR_NAMES, SESSION_LOG];

/// Entry caps per section (oldest dropped first, with an omission note).
pub const MAX_ERRORS: usize = 12;
pub const MAX_FILES: usize = 40;
pub const MAX_COMMANDS: usize = 25;
pub const MAX_ERROR_NAMES: usize = 20;
/// Characters kept of a quoted request in the goal section.
pub const GOAL_QUOTE_CHARS: usize = 600;
/// Characters kept of a command, path or error detail inside a structured entry.
pub const KEY_CHARS: usize = 200;
pub const DETAIL_CHARS: usize = 160;

/// Makes quoted text safe to sit between the entry separators: backticks would end the code
/// span, em dashes and arrows are the separators the merge parser splits on. Only punctuation
/// changes, so the words stay those of the source.
pub fn quote_part(text: &str) -> Cow<'_, str> {
    // `—` and `→` both start with the byte E2: text with neither that byte nor a backtick is
    // returned as it is without decoding a character.
    if memchr::memchr2(b'`', 0xE2, text.as_bytes()).is_none() || !text.contains(['`', '—', '→'])
    {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.replace('`', "'").replace('—', "-").replace('→', "->"))
}

/// A command, path or call argument as an entry key: shortened to [`KEY_CHARS`], then made
/// safe by [`quote_part`]. Borrows `text` when neither changes it.
pub fn key_part(text: &str) -> Cow<'_, str> {
    match shorten(text, KEY_CHARS) {
        Cow::Borrowed(short) => quote_part(short),
        Cow::Owned(short) => Cow::Owned(quote_part(&short).into_owned()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalLine {
    pub id: i64,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorEntry {
    /// The failing result's message id.
    pub id: i64,
    /// `` `cmd` `` or `` tool `arg` ``.
    pub key: String,
    pub outcome: Outcome,
    pub detail: Option<String>,
    /// Index (in the projected messages) of the result to quote `detail` from, while not yet
    /// quoted: only entries that survive the section cap are worth the scan.
    pub detail_from: Option<usize>,
    /// The message id of the first later success of the same call.
    pub fixed_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry<'a> {
    pub last_id: i64,
    /// Borrowed from the message or the previous projection unless cleaning changed it.
    pub path: Cow<'a, str>,
    pub actions: Vec<FileAction>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandEntry<'a> {
    /// The message id of the latest result.
    pub last_id: i64,
    pub command: Cow<'a, str>,
    pub last: Outcome,
    /// The first failure before the latest run, so "failed, then passed" stays visible.
    pub earlier_failure: Option<(i64, Outcome)>,
    pub runs: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameEntry<'a> {
    pub first_id: i64,
    pub name: &'a str,
}

/// Omitted-entry counts carried across merges, one per section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Omitted {
    pub goal: usize,
    pub errors: usize,
    pub files: usize,
    pub commands: usize,
    pub names: usize,
    pub log: usize,
}

/// Everything a projection states, before caps and budget are applied. Paths, commands and
/// names borrow from the projected messages and the previous projection (`'a`): most of them
/// need no copy.
#[derive(Debug, Clone, Default)]
pub struct Facts<'a> {
    pub first_request: Option<GoalLine>,
    pub latest_request: Option<GoalLine>,
    pub errors: Vec<ErrorEntry>,
    pub files: Vec<FileEntry<'a>>,
    pub commands: Vec<CommandEntry<'a>>,
    pub names: Vec<NameEntry<'a>>,
    /// Already-rendered session-log lines, oldest first.
    pub log: Vec<String>,
    pub omitted: Omitted,
}

/// `- [#N] ` with room for `rest` more bytes: every entry line starts so.
fn entry_start(id: i64, rest: usize) -> String {
    let mut out = String::with_capacity(rest + 28);
    out.push_str("- ");
    push_cite(&mut out, id);
    out.push(' ');
    out
}

/// Appends `[#N]`, without going through `fmt` (this runs for every line of a projection).
pub fn push_cite(out: &mut String, id: i64) {
    out.push_str("[#");
    out.push_str(itoa::Buffer::new().format(id));
    out.push(']');
}

pub fn render_goal(label: &str, line: &GoalLine) -> String {
    let mut out = entry_start(line.id, label.len() + line.text.len() + 2);
    out.push_str(label);
    out.push_str(": ");
    out.push_str(&line.text);
    out
}

pub fn render_error(e: &ErrorEntry) -> String {
    let detail = e.detail.as_deref().unwrap_or("");
    let mut out = entry_start(e.id, e.key.len() + detail.len() + 64);
    out.push_str(&e.key);
    out.push_str(" — ");
    e.outcome.describe_into(&mut out);
    if let Some(detail) = &e.detail {
        out.push_str(": ");
        out.push_str(detail);
    }
    match e.fixed_at {
        Some(id) => {
            out.push_str(" → fixed at ");
            push_cite(&mut out, id);
        }
        None => out.push_str(" → not fixed yet"),
    }
    out
}

pub fn render_file(f: &FileEntry<'_>) -> String {
    let mut out = entry_start(f.last_id, f.path.len() + 48);
    out.push_str(&f.path);
    out.push_str(" — ");
    for (i, action) in f.actions.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(action.word());
    }
    out
}

pub fn render_command(c: &CommandEntry<'_>) -> String {
    let mut out = entry_start(c.last_id, c.command.len() + 48);
    out.push('`');
    out.push_str(&c.command);
    out.push_str("` — ");
    c.last.describe_into(&mut out);
    if let Some((id, outcome)) = c.earlier_failure {
        out.push_str("; earlier ");
        outcome.describe_into(&mut out);
        out.push_str(" at ");
        push_cite(&mut out, id);
    }
    if c.runs > 1 {
        out.push_str("; ");
        out.push_str(itoa::Buffer::new().format(c.runs));
        out.push_str(" runs");
    }
    out
}

pub fn render_name(n: &NameEntry<'_>) -> String {
    let mut out = entry_start(n.first_id, n.name.len());
    out.push_str(n.name);
    out
}

pub fn entries_note(n: usize) -> String {
    format!("[… {n} older entries omitted …]")
}

pub fn log_note(n: usize) -> String {
    format!("[… {n} earlier lines omitted …]")
}

/// One section ready to print: heading, omission note, entry lines (oldest first).
#[derive(Debug, Clone)]
pub struct Rendered {
    pub heading: &'static str,
    pub omitted: usize,
    pub lines: Vec<String>,
    pub is_log: bool,
}

impl Rendered {
    pub fn note(&self) -> Option<String> {
        match (self.omitted, self.is_log) {
            (0, _) => None,
            (n, true) => Some(log_note(n)),
            (n, false) => Some(entries_note(n)),
        }
    }

    /// Characters this section adds to the projection, including the blank line that
    /// separates it from the previous one.
    pub fn chars(&self) -> usize {
        if self.lines.is_empty() && self.omitted == 0 {
            return 0;
        }
        let note = self.note().map_or(0, |n| n.chars().count() + 1);
        let lines: usize = self.lines.iter().map(|l| l.chars().count() + 1).sum();
        self.heading.chars().count() + 1 + note + lines + 1
    }

    /// Drops the oldest entry, counting it as omitted.
    pub fn drop_oldest(&mut self) -> bool {
        if self.lines.is_empty() {
            return false;
        }
        self.lines.remove(0);
        self.omitted += 1;
        true
    }
}

/// Joins sections into the projection text; empty sections are left out entirely.
pub fn join(sections: &[Rendered]) -> String {
    let mut out = String::new();
    for s in sections {
        if s.lines.is_empty() && s.omitted == 0 {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(s.heading);
        out.push('\n');
        if let Some(note) = s.note() {
            out.push_str(&note);
            out.push('\n');
        }
        for line in &s.lines {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
