//! Scanning free text (tool output, pasted errors) for what the projection lists by name:
//! the line that says what went wrong, named errors, and source paths in error locations.
//!
//! Every tool result of the middle passes through here, so the scanners jump between rare
//! bytes with `memchr` / `aho-corasick` instead of walking every word: a 300 KB middle must cost
//! well under a millisecond. They must only ever return text that occurs in the input.

use std::sync::LazyLock;

use aho_corasick::{packed, AhoCorasick};
use memchr::{memchr, memchr3_iter, memmem};

use super::sanitize::excerpt_output;

const ERROR_WORDS: &[&str] = &[
    "error",
    "exception",
    "panicked",
    "fatal",
    "failed",
    "failure",
    "cannot",
    "not found",
    "denied",
    "refused",
    "traceback",
];

/// [`ERROR_WORDS`], matched ASCII-case-insensitively.
static ERROR_WORD_FINDER: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(ERROR_WORDS)
        .expect("fixed patterns build")
});

const TRACEBACK_HEADER: &str = "traceback (most recent call last)";

/// The line of `content` that best says what went wrong, shortened: the line of its first error
/// name (`ModuleNotFoundError: …`, `error[E0382]: …`), else the first line with an error word
/// other than a bare traceback header. `first_name` is where the first of [`error_names`]
/// starts; the projector has read those from every tool result already.
pub fn error_line(content: &str, first_name: Option<usize>, max: usize) -> Option<String> {
    let line = match first_name {
        Some(start) => Some(line_at(content, start)),
        None => first_error_word_line(content),
    };
    line.map(|l| excerpt_output(l, max))
        .filter(|l| !l.is_empty())
}

fn first_error_word_line(content: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(m) = ERROR_WORD_FINDER.find(&content[from..]) {
        let line = line_at(content, from + m.start());
        let is_header = line.len() >= TRACEBACK_HEADER.len()
            && line.as_bytes()[..TRACEBACK_HEADER.len()]
                .eq_ignore_ascii_case(TRACEBACK_HEADER.as_bytes());
        if !is_header {
            return Some(line);
        }
        // The rest of a header line cannot qualify: go on after it.
        let line_end = line.as_ptr() as usize - content.as_ptr() as usize + line.len();
        let rest = &content.as_bytes()[line_end..];
        from = if rest.starts_with(b"\\n") {
            line_end + 2
        } else {
            match memchr(b'\n', rest) {
                Some(nl) => line_end + nl + 1,
                None => return None,
            }
        };
    }
    None
}

/// The line (as `str::lines` yields it) that contains byte `pos`, where a `\n` escape also ends
/// a line: JSON-wrapped tool output keeps its line breaks so, and the line to quote is the one
/// with the error, not the whole JSON text.
fn line_at(content: &str, pos: usize) -> &str {
    let bytes = content.as_bytes();
    let start = memchr::memrchr(b'\n', &bytes[..pos]).map_or(0, |p| p + 1);
    let start = memmem::rfind_iter(&bytes[start..pos], b"\\n")
        .map(|p| start + p)
        .find(|&p| escape_ends_at(bytes, p + 2))
        .map_or(start, |p| p + 2);
    let end = memchr(b'\n', &bytes[pos..]).map_or(bytes.len(), |p| pos + p);
    let end = memmem::find_iter(&bytes[pos..end], b"\\n")
        .map(|p| pos + p)
        .find(|&p| escape_ends_at(bytes, p + 2))
        .unwrap_or(end);
    let line = &content[start..end];
    line.strip_suffix('\r').unwrap_or(line)
}

const ERRNO_NAMES: &[&str] = &[
    "EACCES",
    "EADDRINUSE",
    "EADDRNOTAVAIL",
    "EAGAIN",
    "EAI_AGAIN",
    "EBADF",
    "EBUSY",
    "ECONNABORTED",
    "ECONNREFUSED",
    "ECONNRESET",
    "EEXIST",
    "EHOSTUNREACH",
    "EINVAL",
    "EISDIR",
    "EMFILE",
    "ENETUNREACH",
    "ENOENT",
    "ENOMEM",
    "ENOSPC",
    "ENOTDIR",
    "ENOTEMPTY",
    "ENOTFOUND",
    "EPERM",
    "EPIPE",
    "EROFS",
    "ETIMEDOUT",
    "EXDEV",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGILL",
    "SIGKILL",
    "SIGPIPE",
    "SIGSEGV",
    "SIGTERM",
];

/// Words are runs of ASCII letters, digits and `_`; every other byte (UTF-8 included) ends one.
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Whether `b[..p]` ends with an escape (`\n`, `\t`, `\r`) whose backslash is not itself
/// escaped. Tool results stored as JSON carry their line breaks so, and the letter after the
/// backslash must not glue onto the next word (`\nValueError`, `\nsrc/app.py:3`).
fn escape_ends_at(b: &[u8], p: usize) -> bool {
    if p < 2 || !matches!(b[p - 1], b'n' | b't' | b'r') || b[p - 2] != b'\\' {
        return false;
    }
    let backslashes = b[..p - 1].iter().rev().take_while(|&&c| c == b'\\').count();
    backslashes % 2 == 1
}

/// Whether a terminal control sequence (CSI: `ESC [`, parameter bytes, a final letter) ends at
/// `p`, written raw, as its C1 form (U+009B), or as the JSON escape of either (`\u001b[31m`,
/// six characters for the ESC, as a tool result stored as JSON carries it). Coloured output
/// puts the final `m` of a colour right before a word: `\u001b[31mTypeError` names
/// `TypeError`, not `31mTypeError`.
///
/// Only a letter can end a sequence and glue onto a word, and inside a word the byte before a
/// letter is a letter, none of `[`, a parameter byte, the C1 byte or the `b` of `\u009b`: the
/// check costs a few compares there.
fn csi_ends_at(b: &[u8], p: usize) -> bool {
    if p < 2 || !b[p - 1].is_ascii_alphabetic() {
        return false;
    }
    let params = b[..p - 1]
        .iter()
        .rev()
        .take_while(|c| (0x30..=0x3F).contains(*c))
        .count();
    let before = &b[..p - 1 - params];
    let (intro, json): (&[u8], &[u8]) = match before.last() {
        Some(b'[') => {
            let intro = &before[..before.len() - 1];
            if intro.ends_with(b"\x1b") {
                return true;
            }
            (intro, b"\\u001b")
        }
        Some(0x9B) => return before.ends_with("\u{9b}".as_bytes()),
        Some(b'b' | b'B') => (before, b"\\u009b"),
        _ => return false,
    };
    let Some(at) = intro.len().checked_sub(json.len()) else {
        return false;
    };
    // The JSON form counts only when its backslash is not itself escaped (`\\u001b` is text).
    let backslashes = intro[..at]
        .iter()
        .rev()
        .take_while(|&&c| c == b'\\')
        .count();
    intro[at..].eq_ignore_ascii_case(json) && backslashes % 2 == 0
}

/// Whether a word or path token starts at `p` although the byte before it is a word byte: after
/// an escape (`\n`) or a control sequence (`\u001b[31m`).
///
/// Path tokens are walked back byte by byte through this check, so it first rules out what
/// neither can end with, inline: both end in a letter after a `\`, a parameter byte, `[`, the
/// C1 byte or the `b` of `\u009b`, and inside a word a letter follows a letter.
#[inline(always)]
fn boundary_at(b: &[u8], p: usize) -> bool {
    p >= 2
        && b[p - 1].is_ascii_alphabetic()
        && matches!(b[p - 2], b'\\' | 0x30..=0x3F | b'[' | 0x9B | b'b' | b'B')
        && (escape_ends_at(b, p) || csi_ends_at(b, p))
}

/// Whether a word starts at `p`: after a non-word byte, an escape or a control sequence.
fn starts_word(b: &[u8], p: usize) -> bool {
    p == 0 || !is_word_byte(b[p - 1]) || boundary_at(b, p)
}

/// Named errors in `text`, in order of first appearance: `ModuleNotFoundError`,
/// `NullPointerException`, Rust `E0382`, TypeScript `TS2304`, errno names like `ECONNREFUSED`.
pub fn error_names(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let mut last_start = None;
    for start in error_name_starts(text.as_bytes()) {
        // Candidates come in text order, a word twice in a row when both rules find it.
        if last_start == Some(start) {
            continue;
        }
        last_start = Some(start);
        if let Some(len) = error_name_at(text, start) {
            let word = &text[start..start + len];
            if !out.contains(&word) {
                out.push(word);
            }
        }
    }
    out
}

/// Starts of the words of `text` that may be error names, in text order (a start can repeat).
///
/// Every error name starts with `E`, `S` or `T` (codes, errno and signal names) or ends with
/// `Error` / `Exception`, so only words found from those bytes are looked at. One pass: every
/// `Error` / `Exception` suffix starts with an `E` this scan visits anyway (neither word can
/// overlap itself, so this finds what a substring search finds). The order holds without a
/// sort: a suffix's word starts at or after every word start seen before the suffix, since no
/// word starts inside a word.
fn error_name_starts(b: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr3_iter(b'E', b'S', b'T', b).flat_map(move |p| {
        let own = starts_word(b, p).then_some(p);
        let suffix = if b[p] != b'E' {
            None
        } else if b[p..].starts_with(b"Error") {
            suffix_word_start(b, p, 5)
        } else if b[p..].starts_with(b"Exception") {
            suffix_word_start(b, p, 9)
        } else {
            None
        };
        own.into_iter().chain(suffix)
    })
}

/// Start of the error name that `text[p..p + len]` (an `Error` / `Exception` suffix) ends, if
/// that suffix ends a word and the word is not too long to be a name.
fn suffix_word_start(b: &[u8], p: usize, len: usize) -> Option<usize> {
    let end = p + len;
    if end < b.len() && is_word_byte(b[end]) {
        return None;
    }
    let mut s = p;
    while !starts_word(b, s) && end - s <= MAX_NAME_LEN {
        s -= 1;
    }
    starts_word(b, s).then_some(s)
}

/// Length of the word at `s` when it is an error name.
fn error_name_at(text: &str, s: usize) -> Option<usize> {
    let len = text.as_bytes()[s..]
        .iter()
        .take_while(|&&c| is_word_byte(c))
        .count();
    is_error_name(&text[s..s + len]).then_some(len)
}

const MAX_NAME_LEN: usize = 60;

fn is_error_name(word: &str) -> bool {
    let b = word.as_bytes();
    let digits_after = |prefix: usize, min: usize, max: usize| {
        let n = b.len() - prefix;
        n >= min && n <= max && b[prefix..].iter().all(u8::is_ascii_digit)
    };
    if b.len() < 5 || b.len() > MAX_NAME_LEN {
        return false;
    }
    if b[0] == b'E' && digits_after(1, 4, 4) {
        return true;
    }
    if word.starts_with("TS") && digits_after(2, 4, 5) {
        return true;
    }
    if ERRNO_NAMES.contains(&word) {
        return true;
    }
    b[0].is_ascii_uppercase()
        && b.iter().any(u8::is_ascii_lowercase)
        && ["Error", "Exception"]
            .iter()
            .any(|s| word.len() > s.len() && word.ends_with(s))
}

const SOURCE_EXTENSIONS: &[&str] = &[
    "c", "cc", "cfg", "cpp", "cs", "css", "ex", "exs", "go", "h", "hpp", "html", "ini", "java",
    "js", "json", "jsx", "kt", "lock", "md", "mjs", "php", "py", "rb", "rs", "sh", "sql", "swift",
    "toml", "ts", "tsx", "txt", "vue", "xml", "yaml", "yml",
];

/// Tokens are runs of path characters and `:` (so `src/lib.rs:12:5` is one token).
fn is_token_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"_./-~:".contains(&c)
}

/// A `.` and the first letter of a source extension, as patterns for a SIMD (Teddy) search: the
/// start of every `.ext` and of few other dots. Two bytes and at most 32 patterns keep it on the
/// fastest variant. `None` where the CPU has no such search; [`mentioned_paths`] then walks the
/// dots itself.
static EXTENSION_FINDER: LazyLock<Option<packed::Searcher>> = LazyLock::new(|| {
    let mut builder = packed::Config::new()
        .match_kind(packed::MatchKind::LeftmostFirst)
        .builder();
    let mut firsts: Vec<u8> = SOURCE_EXTENSIONS.iter().map(|e| e.as_bytes()[0]).collect();
    firsts.sort_unstable();
    firsts.dedup();
    for first in firsts {
        builder.add([b'.', first]);
    }
    builder.build()
});

/// File paths named in error output (`src/lib.rs:12:5`, `tests/test_core.py`), without line
/// numbers, in order of first appearance.
///
/// A path's token contains `.ext` for one of [`SOURCE_EXTENSIONS`], so only tokens around the
/// start of such an extension are looked at. Test output has a dot run (`... ok`) on every
/// line: the extension search passes them without stopping, where a dot-by-dot walk stopped at
/// each.
pub fn mentioned_paths(text: &str) -> Vec<&str> {
    match &*EXTENSION_FINDER {
        Some(finder) => paths_at(text, finder.find_iter(text).map(|m| m.start())),
        None => paths_at(text, dots_before_letters(text.as_bytes())),
    }
}

/// Every `.` that is followed by an ASCII letter (each extension starts with one).
fn dots_before_letters(b: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memchr_iter(b'.', b).filter(|&dot| b.get(dot + 1).is_some_and(u8::is_ascii_alphabetic))
}

/// The paths of the tokens that contain the candidate positions (ascending), each token once.
fn paths_at(text: &str, candidates: impl Iterator<Item = usize>) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out: Vec<&str> = Vec::new();
    let mut token_end = 0;
    for at in candidates {
        if at < token_end {
            continue;
        }
        let mut start = at;
        while start > 0 && is_token_byte(b[start - 1]) && !boundary_at(b, start) {
            start -= 1;
        }
        token_end = at + b[at..].iter().take_while(|&&c| is_token_byte(c)).count();
        if let Some(path) = token_path(&text[start..token_end]) {
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// The path of a token (`src/lib.rs:12:5` → `src/lib.rs`) when it names a source file. Tokens are
/// ASCII (see [`is_token_byte`]), so byte searches find exactly the characters.
fn token_path(token: &str) -> Option<&str> {
    let b = token.as_bytes();
    let path_end = memchr(b':', b).unwrap_or(b.len());
    let path_end = b[..path_end]
        .iter()
        .rposition(|&c| c != b'.')
        .map_or(0, |last| last + 1);
    let path = &token[..path_end];
    let dot = memchr::memrchr(b'.', path.as_bytes())?;
    let (stem, ext) = (&path[..dot], &path[dot + 1..]);
    let name_start = memchr::memrchr(b'/', stem.as_bytes()).map_or(0, |slash| slash + 1);
    let stem_name = &stem.as_bytes()[name_start..];
    let keep = stem_name.iter().any(u8::is_ascii_alphabetic)
        && is_source_extension(ext)
        && path.len() <= 200;
    keep.then_some(path)
}

/// An extension of at most 8 bytes packed into an integer (no extension has a NUL byte, so the
/// packing is one to one).
fn packed_extension(ext: &str) -> Option<u64> {
    (ext.len() <= 8).then(|| ext.bytes().fold(0, |key, c| key << 8 | u64::from(c)))
}

/// [`SOURCE_EXTENSIONS`] packed and sorted: a lookup compares integers, not strings.
static EXTENSION_KEYS: LazyLock<Vec<u64>> = LazyLock::new(|| {
    let mut keys: Vec<u64> = SOURCE_EXTENSIONS
        .iter()
        .filter_map(|e| packed_extension(e))
        .collect();
    keys.sort_unstable();
    keys
});

fn is_source_extension(ext: &str) -> bool {
    packed_extension(ext).is_some_and(|key| EXTENSION_KEYS.binary_search(&key).is_ok())
}

#[cfg(test)]
mod tests;
