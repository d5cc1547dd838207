//! Quoted text is data: the cleanup every excerpt goes through before it enters a projection.
//!
//! A projection is re-read by the model as part of its prompt, so a tool result that carries a
//! terminal escape, a bidi override, a chat-template marker or a fake `## Heading` must not be
//! able to steer it. This module only removes or defuses such text; it must not rephrase, and it
//! must never drop or merge letters and digits of a word, because the faithfulness check compares
//! words of the excerpt with words of the cleaned source.

use std::borrow::Cow;

/// Cleans `text` and keeps its line structure (`\n` and `\t` survive).
///
/// Every line that would start with `#` (after leading blanks) gets a `\` in front of it, so a
/// quoted line can never open a section of its own.
pub fn clean_text(text: &str) -> String {
    let stripped = strip_invisible(text);
    let defused = neutralize_markers(&stripped);
    let mut out = String::with_capacity(defused.len());
    for (i, line) in defused.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.trim_start().starts_with('#') {
            out.push('\\');
        }
        out.push_str(line);
    }
    out
}

/// Cleans `text` and folds it onto one line (runs of whitespace become one space).
///
/// A one-line excerpt can only start where the projector puts it, after its own `[#N]` prefix,
/// so it needs no `#` escape; it still gets one at its start for callers that print it bare.
pub fn one_line(text: &str) -> String {
    one_line_cow(text).into_owned()
}

/// [`one_line`], borrowing `text` when it is already clean (most commands and paths are).
pub fn one_line_cow(text: &str) -> Cow<'_, str> {
    one_line_upto(text, usize::MAX)
}

/// [`one_line_cow`], or, when that is longer than `limit` characters, a prefix of it that is
/// longer than `limit`: what [`excerpt`] needs to decide and cut, without folding the rest.
fn one_line_upto(text: &str, limit: usize) -> Cow<'_, str> {
    if is_clean_line(text) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(fold_plain(text, limit).unwrap_or_else(|| fold_any(text)))
}

/// [`one_line`] of any text: strip, defuse, then fold.
fn fold_any(text: &str) -> String {
    let stripped = strip_invisible(text);
    let defused = neutralize_markers(&stripped);
    let mut out = String::with_capacity(defused.len());
    let mut push = |word: &str| {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    };
    // After stripping, the only ASCII whitespace left is ` `, `\t` and `\n`, where both splits
    // agree; the ASCII one is much cheaper.
    if defused.is_ascii() {
        defused.split_ascii_whitespace().for_each(&mut push);
    } else {
        defused.split_whitespace().for_each(&mut push);
    }
    if out.starts_with('#') {
        out.insert(0, '\\');
    }
    out
}

/// [`one_line`] of text made only of printable ASCII, `\n` and `\t`, in one pass: there is
/// nothing to strip, so markers are defused and whitespace folded as the bytes go by. `None`
/// at the first other byte; the general path then cleans the text (tool output usually stays
/// here: lines of ASCII with an `error[E0308]` or `<path>` in them). Stops once the output is
/// longer than `limit`; only its last few characters can then differ from the general path's
/// (a marker whose rest lies beyond the stop), which is what [`EXCERPT_SLACK`] covers.
fn fold_plain(text: &str, limit: usize) -> Option<String> {
    let b = text.as_bytes();
    let mut out = String::with_capacity(b.len().min(limit.saturating_add(16)));
    let mut space = false;
    let mut i = 0;
    // Output only ever grows at its end, so stopping early leaves a prefix of the whole fold.
    while i < b.len() && out.len() <= limit {
        let c = b[i];
        if matches!(c, b' ' | b'\n' | b'\t') {
            space = !out.is_empty();
            i += 1;
            continue;
        }
        if !c.is_ascii_graphic() {
            return None;
        }
        if space {
            out.push(' ');
            space = false;
        }
        if c == b'<' || c == b'[' {
            // As in [`neutralize_markers`]: a space after the opener of `<|…` or of a marker.
            out.push(c as char);
            if b.get(i + 1) == Some(&b'|') {
                out.push(' ');
                i += 1;
            } else if let Some(m) = MARKERS
                .iter()
                .find(|m| starts_with_ignore_ascii_case(&text[i..], m))
            {
                out.push(' ');
                out.push_str(&text[i + 1..i + m.len()]);
                i += m.len();
            } else {
                i += 1;
            }
            continue;
        }
        let run = b[i..]
            .iter()
            .position(|&c| !c.is_ascii_graphic() || c == b'<' || c == b'[')
            .unwrap_or(b.len() - i);
        out.push_str(&text[i..i + run]);
        i += run;
    }
    if out.starts_with('#') {
        out.insert(0, '\\');
    }
    Some(out)
}

/// Text that [`one_line`] would return unchanged: printable ASCII without marker openers, single
/// spaces between words, not starting with `#`. Most commands, paths and log lines are.
fn is_clean_line(text: &str) -> bool {
    let b = text.as_bytes();
    if b.first().is_some_and(|&c| c == b' ' || c == b'#') || b.last() == Some(&b' ') {
        return false;
    }
    let mut after_space = false;
    b.iter().all(|&c| {
        let space = c == b' ';
        let ok = (b' '..=b'~').contains(&c) && c != b'<' && c != b'[' && !(space && after_space);
        after_space = space;
        ok
    })
}

/// `shorten(&one_line(text), max)`, without cleaning all of a long text to keep its start.
///
/// Cleaning a prefix of the input yields a prefix of the full cleaning, except in its last few
/// characters: a marker or escape cut in half, a space not yet followed by a word. So once a
/// prefix cleans to more than `max` + [`EXCERPT_SLACK`] characters, its excerpt is the excerpt
/// of the whole text, byte for byte. A 100 KB tool result then costs a few hundred bytes.
pub fn excerpt(text: &str, max: usize) -> String {
    excerpt_with(text, max, false)
}

/// [`excerpt`] of a tool's output, where terminal control sequences spelled as JSON escapes go
/// too (see [`strip_json_csi`]): a result stored as JSON carries its colours so, and they are
/// the same escapes as the raw ones [`one_line`] drops. Only output: a command or a request that
/// spells one is quoted as written.
pub fn excerpt_output(text: &str, max: usize) -> String {
    excerpt_with(text, max, true)
}

fn excerpt_with(text: &str, max: usize, output: bool) -> String {
    // Plain text cleans to about its own length, so the first try usually suffices.
    let mut take = max.saturating_add(3 * EXCERPT_SLACK);
    while take < text.len() {
        let mut cut = take;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        // A prefix strips to a prefix of the whole text's stripping, as it cleans to one.
        let prefix = strip_if(&text[..cut], output);
        let line = one_line_upto(&prefix, max.saturating_add(EXCERPT_SLACK));
        if line.chars().count() > max.saturating_add(EXCERPT_SLACK) {
            return shorten_cow(line, max);
        }
        take = take.saturating_mul(4);
    }
    shorten_cow(one_line_cow(&strip_if(text, output)), max)
}

fn strip_if(text: &str, output: bool) -> Cow<'_, str> {
    if output {
        strip_json_csi(text)
    } else {
        Cow::Borrowed(text)
    }
}

/// Drops CSI sequences spelled as JSON escapes: `\u001b[` or `\u009b`, parameter and
/// intermediate bytes, one final byte. A sequence cut off by the end of the text goes to its
/// end (so a prefix strips to a prefix of the whole); a backslash that is itself escaped
/// (`\\u001b`) starts no escape. Borrows `text` when there is nothing to drop.
pub(super) fn strip_json_csi(text: &str) -> Cow<'_, str> {
    let b = text.as_bytes();
    let (mut out, mut copied, mut from) = (String::new(), 0, 0);
    // Backslashes are few outside JSON and one per escape inside it: a `memchr` from each costs
    // less than setting up a substring search per quote.
    while let Some(at) = memchr::memchr(b'\\', &b[from..]).map(|p| from + p) {
        let len = json_csi_len(&b[at..]);
        let escaped = b[..at].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 1;
        if len == 0 || escaped {
            from = at + 1;
            continue;
        }
        out.push_str(&text[copied..at]);
        copied = at + len;
        from = copied;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Length of the JSON-escaped CSI sequence at the start of `s`, 0 when there is none. A `"`
/// would end the JSON string and a `\\` starts the next escape: neither belongs to it.
fn json_csi_len(s: &[u8]) -> usize {
    let starts =
        |intro: &[u8]| s.len() >= intro.len() && s[..intro.len()].eq_ignore_ascii_case(intro);
    let mut n = if starts(b"\\u001b[") {
        7
    } else if starts(b"\\u009b") {
        6
    } else {
        return 0;
    };
    while n < s.len() && (0x20..=0x3F).contains(&s[n]) && s[n] != b'"' {
        n += 1;
    }
    match s.get(n) {
        Some(&c) if (0x40..=0x7E).contains(&c) && c != b'\\' => n + 1,
        _ => n,
    }
}

/// More than the characters a cut can change at the end of a cleaned prefix: the longest
/// marker (8) with its inserted spaces, and one joining space.
const EXCERPT_SLACK: usize = 32;

/// Cuts `text` to at most `max` characters at a word boundary when it can, marking the cut
/// with ` …`. Only removes words, so the result stays a faithful excerpt.
pub fn shorten(text: &str, max: usize) -> Cow<'_, str> {
    match kept_len(text, max) {
        None => Cow::Borrowed(text),
        Some(0) => Cow::Borrowed("…"),
        Some(len) => Cow::Owned([&text[..len], " …"].concat()),
    }
}

/// Bytes of `text` that [`shorten`] keeps before its ` …`, or `None` when it fits in `max`.
fn kept_len(text: &str, max: usize) -> Option<usize> {
    if text.len() <= max {
        return None;
    }
    let keep = max.saturating_sub(2);
    // Longer than `max` bytes: longer than `max` characters too when every character is a byte.
    let cut = if text.is_ascii() {
        keep
    } else {
        if text.chars().count() <= max {
            return None;
        }
        text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i)
    };
    let head = &text[..cut];
    // Cutting inside a word would leave a fragment that is not a word of the source, except in
    // scripts written without spaces (CJK), where any run of characters is a quote.
    let head = match (text[cut..].chars().next(), head.chars().next_back()) {
        (Some(c), Some(prev)) if !c.is_whitespace() && !is_unspaced_script(prev) => {
            match head.rfind(char::is_whitespace) {
                Some(space) => &head[..space],
                None => "",
            }
        }
        _ => head,
    };
    Some(head.trim_end().len())
}

/// [`shorten`] into an owned text, cutting `text` in place when it is owned.
fn shorten_cow(text: Cow<'_, str>, max: usize) -> String {
    match text {
        Cow::Owned(mut text) => match kept_len(&text, max) {
            None => text,
            Some(0) => "…".to_string(),
            Some(len) => {
                text.truncate(len);
                text.push_str(" …");
                text
            }
        },
        Cow::Borrowed(text) => shorten(text, max).into_owned(),
    }
}

/// Scripts written without spaces between words: Han, kana, Hangul and their punctuation.
pub(crate) fn is_unspaced_script(c: char) -> bool {
    matches!(c, '\u{2E80}'..='\u{9FFF}' | '\u{AC00}'..='\u{D7AF}' | '\u{F900}'..='\u{FAFF}' | '\u{FF00}'..='\u{FFEF}' | '\u{20000}'..='\u{3FFFF}')
}

fn is_zero_width(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{180E}' | '\u{00AD}')
}

fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// Drops ANSI escape sequences (CSI, OSC, two-byte ESC forms, C1 CSI), control characters other
/// than `\n` and `\t`, bidi controls and zero-width characters. `\r` and the Unicode line
/// separators become `\n` so progress-bar output does not glue words together.
///
/// Borrows `text` when it is all printable ASCII, `\n` and `\t` (nothing to strip).
fn strip_invisible(text: &str) -> Cow<'_, str> {
    let is_plain = |c: u8| matches!(c, b'\n' | b'\t' | b' '..=b'~');
    let Some(first) = text.bytes().position(|c| !is_plain(c)) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..first]);
    let mut rest = &text[first..];
    loop {
        // Printable ASCII, `\n` and `\t` stay as they are: copy such runs whole.
        let plain = rest
            .bytes()
            .position(|c| !is_plain(c))
            .unwrap_or(rest.len());
        out.push_str(&rest[..plain]);
        let mut chars = rest[plain..].chars();
        let Some(c) = chars.next() else {
            return Cow::Owned(out);
        };
        match c {
            '\u{1B}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']') | Some('P') | Some('X') | Some('^') | Some('_') => {
                    skip_string(&mut chars)
                }
                // Any other ESC x pair (charset selects, keypad modes, …) is two characters.
                _ => {}
            },
            '\u{9B}' => skip_csi(&mut chars),
            '\u{9D}' => skip_string(&mut chars),
            '\r' => {
                if !chars.as_str().starts_with('\n') {
                    out.push('\n');
                }
            }
            '\u{2028}' | '\u{2029}' | '\u{85}' => out.push('\n'),
            c if c.is_control() || is_bidi(c) || is_zero_width(c) => {}
            c => out.push(c),
        }
        rest = chars.as_str();
    }
}

/// CSI: parameter and intermediate bytes up to one final byte in `@`..=`~`.
fn skip_csi(chars: &mut std::str::Chars<'_>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7E}').contains(&c) {
            return;
        }
        if !('\u{20}'..='\u{3F}').contains(&c) {
            // Malformed sequence: stop at the first byte that cannot belong to it.
            return;
        }
    }
}

/// OSC/DCS/SOS/PM/APC: everything up to BEL or ST (`ESC \` or U+009C).
fn skip_string(chars: &mut std::str::Chars<'_>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{07}' | '\u{9C}' => return,
            '\u{1B}' => {
                if chars.as_str().starts_with('\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

/// Markers a tokenizer may read as a special token. Matched case-insensitively; each gets a space
/// after its first character so it can no longer be parsed as a marker, and stays readable.
const MARKERS: &[&str] = &[
    "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", "<s>", "</s>", "<think>", "</think>",
];

/// Defuses chat-template markers: the whole `<|…|>` family (and its full-width `<｜…｜>`
/// spelling) by breaking the opening pair, plus the fixed markers in [`MARKERS`].
fn neutralize_markers(text: &str) -> Cow<'_, str> {
    // `<` and `[` are ASCII, so a byte search finds exactly the characters.
    let find = |t: &str| memchr::memchr2(b'<', b'[', t.as_bytes());
    if find(text).is_none() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(pos) = find(rest) {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        let opener = &tail[..1];
        let after = &tail[1..];
        if after.starts_with('|') || after.starts_with('｜') {
            out.push_str(opener);
            out.push(' ');
            rest = after;
            continue;
        }
        if let Some(m) = MARKERS
            .iter()
            .find(|m| starts_with_ignore_ascii_case(tail, m))
        {
            out.push_str(opener);
            out.push(' ');
            out.push_str(&tail[1..m.len()]);
            rest = &tail[m.len()..];
            continue;
        }
        out.push_str(opener);
        rest = after;
    }
    out.push_str(rest);
    Cow::Owned(out)
}

fn starts_with_ignore_ascii_case(text: &str, prefix: &str) -> bool {
    text.len() >= prefix.len()
        && text.is_char_boundary(prefix.len())
        && text[..prefix.len()].eq_ignore_ascii_case(prefix)
}

#[cfg(test)]
mod tests;
