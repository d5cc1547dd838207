//! One memory file's entries as text: what counts as an entry (parsing a hand-edited file),
//! the one rule for what an entry may hold (shared by the loader and the tool, so nothing the
//! tool accepts is dropped at the next load), and the notice a snapshot gives for what it left
//! out. No I/O here.

use super::{Loaded, MemoryError, Target};
use crate::screen::screen;

/// One line saying how many entries were left out of a snapshot and why, or nothing. A
/// withheld entry is named by its reason only (never its text: that is what the screen kept
/// out), and reasons are counted, so a file of a thousand bad lines costs one line.
pub(super) fn withheld_notice(t: Target, dropped: &[(String, String)]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (_, why) in dropped {
        match counts.iter_mut().find(|(w, _)| *w == why.as_str()) {
            Some((_, n)) => *n += 1,
            None => counts.push((why, 1)),
        }
    }
    if counts.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = counts
        .iter()
        .take(6)
        .map(|(why, n)| match n {
            1 => format!("1 entry: {why}"),
            n => format!("{n} entries: {why}"),
        })
        .collect();
    format!("\n[withheld from {}: {}]", t.file_name(), parts.join("; "))
}

/// Entries of a file's text: screened, one line each, within `cap` characters.
pub fn parse(text: &str, cap: usize, entry_chars: usize) -> Loaded {
    let mut out = Loaded::default();
    let mut total = 0;
    for raw in text.lines() {
        let line = raw.trim();
        let line = line
            .strip_prefix("- ")
            .or_else(|| line.strip_prefix("* "))
            .unwrap_or(line)
            .trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let n = line.chars().count();
        let why = if !is_text(line) {
            Some("it is not text".to_string())
        } else if let Some(f) = screen(line) {
            Some(format!("it contains {f}"))
        } else if n > entry_chars {
            Some(format!("it is longer than {entry_chars} characters"))
        } else if total + n + 1 > cap {
            Some(format!("the file is past its cap of {cap} characters"))
        } else {
            None
        };
        match why {
            Some(w) => out.dropped.push((line.to_string(), w)),
            None => {
                total += n + 1;
                out.entries.push(line.to_string());
            }
        }
    }
    out
}

/// Whether `line` is text an entry may hold: no control characters but tab (U+0085 is one), no
/// line or paragraph separator (U+2028, U+2029) and no replacement character (bytes that were
/// not UTF-8). The loader drops what fails this and the tool refuses it, with one rule, so an
/// entry the tool "added" is never silently gone at the next load.
pub fn is_text(line: &str) -> bool {
    !line
        .chars()
        .any(|c| (c.is_control() && c != '\t') || matches!(c, '\u{FFFD}' | '\u{2028}' | '\u{2029}'))
}

pub(super) fn render(entries: &[String]) -> String {
    entries.iter().map(|e| format!("- {e}\n")).collect()
}

pub(super) fn find_one(entries: &[String], old: &str) -> Result<usize, MemoryError> {
    let old = old.trim();
    if old.is_empty() {
        return Err(MemoryError::NoOldText);
    }
    let hits: Vec<usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.contains(old))
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [i] => Ok(*i),
        [] => Err(MemoryError::NoMatch),
        _ => Err(MemoryError::Ambiguous(hits.len())),
    }
}
