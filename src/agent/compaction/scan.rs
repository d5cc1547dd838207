//! Scanning free text (tool output, pasted errors) for what the projection lists by name:
//! the line that says what went wrong, named errors, and source paths in error locations.
//!
//! Pure string rules, no regex engine: they must stay cheap on a 300 KB middle and must only
//! ever return text that occurs in the input.

use super::sanitize::{one_line, shorten};

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

/// The line of `content` that best says what went wrong, shortened: the first line naming an
/// error (`ModuleNotFoundError: …`, `error[E0382]: …`), else the first line with an error word
/// other than a bare traceback header.
pub fn error_line(content: &str, max: usize) -> Option<String> {
    let named = content.lines().find(|line| !error_names(line).is_empty());
    named
        .or_else(|| {
            content.lines().find(|line| {
                let lower = line.to_ascii_lowercase();
                !lower.starts_with("traceback (most recent call last)")
                    && ERROR_WORDS.iter().any(|w| lower.contains(w))
            })
        })
        .map(one_line)
        .filter(|l| !l.is_empty())
        .map(|l| shorten(&l, max))
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

/// Named errors in `text`, in order of first appearance: `ModuleNotFoundError`,
/// `NullPointerException`, Rust `E0382`, TypeScript `TS2304`, errno names like `ECONNREFUSED`.
pub fn error_names(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if is_error_name(word) && !out.iter().any(|w| w == word) {
            out.push(word.to_string());
        }
    }
    out
}

fn is_error_name(word: &str) -> bool {
    let b = word.as_bytes();
    let digits_after = |prefix: usize, min: usize, max: usize| {
        let n = b.len() - prefix;
        n >= min && n <= max && b[prefix..].iter().all(u8::is_ascii_digit)
    };
    if b.len() < 5 || b.len() > 60 {
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
    "rs", "py", "js", "mjs", "ts", "tsx", "jsx", "go", "java", "kt", "c", "h", "cc", "cpp", "hpp",
    "cs", "rb", "php", "swift", "ex", "exs", "toml", "yaml", "yml", "json", "md", "sh", "sql",
    "html", "css", "vue", "lock", "cfg", "ini", "xml", "txt",
];

/// File paths named in error output (`src/lib.rs:12:5`, `tests/test_core.py`), without line
/// numbers, in order of first appearance.
pub fn mentioned_paths(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./-~".contains(c);
    for token in text.split(|c: char| !(is_path_char(c) || c == ':')) {
        let path = token.split(':').next().unwrap_or("");
        let path = path.trim_end_matches('.');
        let Some((stem, ext)) = path.rsplit_once('.') else {
            continue;
        };
        let stem_name = stem.rsplit('/').next().unwrap_or("");
        if stem_name.is_empty()
            || !stem_name.chars().any(|c| c.is_ascii_alphabetic())
            || !SOURCE_EXTENSIONS.contains(&ext)
            || path.len() > 200
        {
            continue;
        }
        if !out.iter().any(|p| p == path) {
            out.push(path.to_string());
        }
    }
    out
}
