//! Reading facts out of single messages by fixed rules: what a tool call ran or touched, how a
//! tool result ended (exit code, error), which error names a text contains.
//!
//! Every rule here is a heuristic over recorded text; it must stay deterministic and must never
//! guess a fact that is not written in the message (no exit code → "ran", not "ok").

use std::borrow::Cow;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use memchr::memchr2_iter;
use serde_json::Value;

use super::args::{Arg, Args, COMMAND_KEYS, MAIN_ARG_KEYS, PATCH_KEYS, PATH_KEYS};
use super::sanitize::{one_line, one_line_cow};

/// How one tool run ended, as far as its recorded result says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit code 0, or a non-command tool that reported no error.
    Ok(Option<i32>),
    /// A non-zero exit code, or an error reported without one.
    Failed(Option<i32>),
    /// A command whose result states no exit code and shows no error.
    Ran,
}

impl Outcome {
    pub fn is_failed(self) -> bool {
        matches!(self, Outcome::Failed(_))
    }

    /// Appends the long form for the structured sections: `ok (exit 0)`, `failed (exit 1)`, …
    pub fn describe_into(self, out: &mut String) {
        let (word, code) = match self {
            Outcome::Ok(code) => ("ok", code),
            Outcome::Failed(Some(code)) => ("failed", Some(code)),
            Outcome::Failed(None) => ("failed (error)", None),
            Outcome::Ran => ("ran (no exit code)", None),
        };
        out.push_str(word);
        if let Some(code) = code {
            out.push_str(" (exit ");
            out.push_str(itoa::Buffer::new().format(code));
            out.push(')');
        }
    }

    /// Inverse of [`Outcome::describe_into`], used when merging a previous projection.
    pub fn parse(text: &str) -> Option<Outcome> {
        let code =
            |s: &str| -> Option<i32> { s.strip_prefix("(exit ")?.strip_suffix(')')?.parse().ok() };
        match text {
            "ok" => Some(Outcome::Ok(None)),
            "failed (error)" => Some(Outcome::Failed(None)),
            "ran (no exit code)" => Some(Outcome::Ran),
            _ => {
                if let Some(rest) = text.strip_prefix("ok ") {
                    code(rest).map(|c| Outcome::Ok(Some(c)))
                } else if let Some(rest) = text.strip_prefix("failed ") {
                    code(rest).map(|c| Outcome::Failed(Some(c)))
                } else {
                    None
                }
            }
        }
    }

    /// Short form for session-log labels: `exit 1`, `ok`, `error`, `ran`.
    pub fn label(self) -> Cow<'static, str> {
        match self {
            Outcome::Ok(Some(code)) | Outcome::Failed(Some(code)) => {
                Cow::Owned(["exit ", itoa::Buffer::new().format(code)].concat())
            }
            Outcome::Ok(None) => Cow::Borrowed("ok"),
            Outcome::Failed(None) => Cow::Borrowed("error"),
            Outcome::Ran => Cow::Borrowed("ran"),
        }
    }
}

/// How a file tool touched a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileAction {
    Read,
    Modified,
    Written,
    /// Named in the output of a failed run (a compiler or test error location).
    Mentioned,
}

impl FileAction {
    pub const ALL: [FileAction; 4] = [
        FileAction::Read,
        FileAction::Modified,
        FileAction::Written,
        FileAction::Mentioned,
    ];

    pub fn word(self) -> &'static str {
        match self {
            FileAction::Read => "read",
            FileAction::Modified => "modified",
            FileAction::Written => "written",
            FileAction::Mentioned => "mentioned in an error",
        }
    }
}

/// What one tool call asked for, decoded from its JSON arguments. Borrows from the arguments
/// text where the value is already clean.
#[derive(Debug, Clone, Default)]
pub struct CallFacts<'a> {
    /// The shell command, for tools that run one.
    pub command: Option<Cow<'a, str>>,
    /// Paths the call read or changed.
    pub files: Vec<(Cow<'a, str>, FileAction)>,
    /// The most telling argument for a one-line log excerpt (command, path, query, …).
    pub main_arg: Option<Cow<'a, str>>,
}

pub fn call_facts<'a>(tool_name: &str, arguments: &'a str) -> CallFacts<'a> {
    let args = Args::parse(arguments);
    let mut facts = CallFacts::default();
    let mut paths = Vec::new();
    for value in args.group(PATH_KEYS) {
        match value {
            Arg::Str(s) if !s.trim().is_empty() => paths.push(one_line_of(s)),
            Arg::Json(v) => collect_paths(v, &mut paths),
            _ => {}
        }
    }
    let sub_command = args.group(COMMAND_KEYS).find_map(string_or_words);
    if paths.is_empty() {
        facts.command = sub_command.clone().filter(|c| !c.is_empty());
    }
    if !paths.is_empty() {
        let action = file_action(
            sub_command.as_deref().filter(|c| !c.contains(' ')),
            tool_name,
        );
        facts.files = paths.iter().map(|p| (p.clone(), action)).collect();
    }
    // Raw text: the envelope is line-based, so it must not be folded onto one line first.
    for text in args.group(PATCH_KEYS).filter_map(Arg::as_str) {
        facts.files.extend(
            patch_paths(text)
                .into_iter()
                .map(|(p, a)| (Cow::Owned(p), a)),
        );
    }
    facts.main_arg = facts
        .command
        .clone()
        .or_else(|| paths.first().cloned())
        .or_else(|| facts.files.first().map(|(p, _)| p.clone()))
        .or_else(|| args.group(MAIN_ARG_KEYS).find_map(string_or_words));
    facts
}

/// [`one_line`] of an argument, borrowed when the text is already clean.
fn one_line_of<'a>(s: &Cow<'a, str>) -> Cow<'a, str> {
    match s {
        Cow::Borrowed(b) => one_line_cow(b),
        Cow::Owned(o) => Cow::Owned(one_line(o)),
    }
}

fn string_or_words<'a>(value: &Arg<'a>) -> Option<Cow<'a, str>> {
    match value {
        Arg::Str(s) => Some(one_line_of(s)),
        // `["cargo", "test"]`-style argv arrays.
        Arg::Json(Value::Array(items))
            if items.iter().all(Value::is_string) && !items.is_empty() =>
        {
            Some(Cow::Owned(one_line(
                &items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
            )))
        }
        _ => None,
    }
}

fn collect_paths<'a>(value: &Value, out: &mut Vec<Cow<'a, str>>) {
    match value {
        Value::String(s) if !s.trim().is_empty() => out.push(Cow::Owned(one_line(s))),
        Value::Array(items) => items.iter().for_each(|v| collect_paths(v, out)),
        Value::Object(o) => {
            if let Some(p) = o.get("path") {
                collect_paths(p, out);
            }
        }
        _ => {}
    }
}

/// Read / modified / written, from an editor sub-command (`view`, `str_replace`, …) when the
/// call has one, else from the tool's name.
fn file_action(sub_command: Option<&str>, tool_name: &str) -> FileAction {
    let name = sub_command.unwrap_or(tool_name);
    let name = if name.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(name.to_ascii_lowercase())
    } else {
        Cow::Borrowed(name)
    };
    // A byte-window search: names are a few bytes long, too short to pay for a `str::contains`
    // searcher per word.
    let has = |words: &[&str]| {
        words.iter().any(|w| {
            name.len() >= w.len()
                && name
                    .as_bytes()
                    .windows(w.len())
                    .any(|window| window == w.as_bytes())
        })
    };
    if has(&["write", "create", "save", "new"]) {
        FileAction::Written
    } else if has(&[
        "patch", "edit", "replace", "apply", "modify", "update", "insert", "append", "delete",
        "remove", "rename", "move", "undo",
    ]) {
        FileAction::Modified
    } else {
        FileAction::Read
    }
}

/// Paths named by an apply-patch envelope or a unified diff.
fn patch_paths(text: &str) -> Vec<(String, FileAction)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let found = if let Some(p) = line.strip_prefix("*** Update File: ") {
            Some((p, FileAction::Modified))
        } else if let Some(p) = line.strip_prefix("*** Add File: ") {
            Some((p, FileAction::Written))
        } else if let Some(p) = line.strip_prefix("*** Delete File: ") {
            Some((p, FileAction::Modified))
        } else {
            line.strip_prefix("+++ b/")
                .map(|p| (p, FileAction::Modified))
        };
        if let Some((path, action)) = found {
            let path = one_line(path);
            if !path.is_empty() && !out.iter().any(|(p, _)| *p == path) {
                out.push((path, action));
            }
        }
    }
    out
}

/// The path a pruned `write_file` result names. Pruning of old turns replaces an old result with
/// a one-line stub, `[write_file] wrote to <path> (32 lines)`, and cuts the call's long arguments
/// (the file's content) to a prefix that no longer parses: the stub is then the only readable
/// record of the path. `None` for anything but the whole stub, or for its `?` (no path known).
pub fn pruned_write_path(content: &str) -> Option<Cow<'_, str>> {
    let rest = content.trim().strip_prefix("[write_file] wrote to ")?;
    let (path, size) = rest.rsplit_once(" (")?;
    let (count, unit) = size.strip_suffix(')')?.split_once(' ')?;
    let count_ok = count == "?"
        || (count.starts_with(|c: char| c.is_ascii_digit())
            && count.bytes().all(|c| c.is_ascii_digit() || c == b','));
    if !count_ok || !matches!(unit, "lines" | "chars") || path.contains(['\n', '\r']) {
        return None;
    }
    let path = one_line_cow(path);
    (!path.is_empty() && path != "?").then_some(path)
}

/// Reads the outcome of a tool result. `is_command` decides what a result without an exit code
/// and without an error means: a command "ran", any other tool is "ok".
pub fn result_outcome(content: &str, is_command: bool) -> Outcome {
    if let Some(code) = exit_code(content) {
        return if code == 0 {
            Outcome::Ok(Some(0))
        } else {
            Outcome::Failed(Some(code))
        };
    }
    if looks_like_error(content) {
        Outcome::Failed(None)
    } else if is_command {
        Outcome::Ran
    } else {
        Outcome::Ok(None)
    }
}

/// The last exit code written in `content`: `exit code: 1`, `"exit_code": 2`, `exit status 101`,
/// `exited with code 3`, `-> exit 1` (a pruned-result stub), `returncode=1`, …
///
/// Keywords (`exit`, `returncode`, `return code`, `return_code`, any ASCII case) are found from
/// their rare letter (`x`, `u`) backwards from the end, so the usual result costs one pass of
/// `memchr` and stops at the last keyword that is followed by a code.
pub fn exit_code(content: &str) -> Option<i32> {
    let b = content.as_bytes();
    let free_start = |start: usize| start == 0 || !b[start - 1].is_ascii_alphanumeric();
    let at = |pos: usize, word: &str| {
        b.len() >= pos + word.len()
            && b[pos..pos + word.len()].eq_ignore_ascii_case(word.as_bytes())
    };
    let exit = memchr2_iter(b'x', b'X', b).rev().find_map(|x| {
        let start = x.checked_sub(1)?;
        let found = at(start, "exit") && free_start(start);
        found.then(|| code_after(&content[start + 4..]).map(|c| (start, c)))?
    });
    // A `return` keyword only matters after the last `exit` one: scan no further back.
    let floor = exit.map_or(0, |(start, _)| start + 1);
    let ret = memchr2_iter(b'u', b'U', &b[floor..]).rev().find_map(|u| {
        let start = (floor + u).checked_sub(3).filter(|&s| s >= floor)?;
        if !(at(start, "return") && free_start(start)) {
            return None;
        }
        let tail = ["code", " code", "_code"]
            .iter()
            .find(|w| at(start + 6, w))?;
        code_after(&content[start + 6 + tail.len()..]).map(|c| (start, c))
    });
    match (exit, ret) {
        (Some(e), Some(r)) => Some(if e.0 > r.0 { e.1 } else { r.1 }),
        (e, r) => e.or(r).map(|(_, code)| code),
    }
}

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.len() >= prefix.len()
        && text.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

fn code_after(mut rest: &str) -> Option<i32> {
    let mut separated = false;
    loop {
        let trimmed = rest.trim_start_matches([' ', '\t', ':', '=', '"', '\'']);
        if trimmed.len() != rest.len() {
            separated = true;
            rest = trimmed;
            continue;
        }
        let word = [
            "_code", "code", "_status", "status", "ed with", "ed", "with",
        ]
        .iter()
        .find(|w| starts_with_ignore_case(rest, w));
        match word {
            Some(w) => {
                separated = true;
                rest = &rest[w.len()..];
            }
            None => break,
        }
    }
    if !separated {
        return None;
    }
    let (sign, digits) = match rest.strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, rest),
    };
    let len = digits.bytes().take_while(u8::is_ascii_digit).count();
    if len == 0 || len > 4 || digits[len..].starts_with(|c: char| c.is_alphanumeric()) {
        return None;
    }
    digits[..len].parse::<i32>().ok().map(|n| sign * n)
}

/// Error markers anywhere in a result, matched ASCII-case-insensitively.
static ERROR_MARKERS: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build([
            "traceback (most recent call last)",
            "\"error\": \"",
            "\"error\":\"",
            "\"success\": false",
            "\"ok\": false",
        ])
        .expect("fixed patterns build")
});

fn looks_like_error(content: &str) -> bool {
    let head = content.trim_start();
    ["error", "failed", "fatal"]
        .iter()
        .any(|w| starts_with_ignore_case(head, w))
        || ERROR_MARKERS.is_match(content)
}
