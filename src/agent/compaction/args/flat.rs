//! The one-pass reader for the usual tool-call arguments: a flat JSON object of plain values.
//! Most calls look like `{"command": "cargo test", "timeout": 120}`, and walking their bytes
//! once is several times cheaper than the serde visitor. It must only answer where the serde
//! reader (and so the `Value` parse) reads the same; anything else is left to it.

use std::borrow::Cow;

use super::{slot, Arg, Args, RAW_VALUE_TOKEN};

/// The usual arguments in one pass over the bytes: a flat object whose values are strings
/// without escapes, small integers, booleans or null, and whose keys are strings without
/// escapes. `None` for anything else (escapes, nesting, fractions, broken JSON), which the
/// serde reader then takes: this path only answers where both read the same.
pub(super) fn read(text: &str) -> Option<Args<'_>> {
    let b = text.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut args = Args::default();
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return only_ws(b, i + 1).then_some(args);
    }
    loop {
        let (key, next) = plain_string(text, i)?;
        if key == RAW_VALUE_TOKEN {
            return None;
        }
        i = skip_ws(b, next);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(b, i + 1);
        let (value, next) = match *b.get(i)? {
            b'"' => {
                let (value, next) = plain_string(text, i)?;
                (Arg::Str(Cow::Borrowed(value)), next)
            }
            b't' if b[i..].starts_with(b"true") => (Arg::Other, i + 4),
            b'f' if b[i..].starts_with(b"false") => (Arg::Other, i + 5),
            b'n' if b[i..].starts_with(b"null") => (Arg::Other, i + 4),
            b'-' | b'0'..=b'9' => (Arg::Other, plain_integer(b, i)?),
            _ => return None,
        };
        if let Some(slot) = slot(key) {
            args.slots[slot] = Some(value);
        }
        i = skip_ws(b, next);
        match *b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b'}' => return only_ws(b, i + 1).then_some(args),
            _ => return None,
        }
    }
}

/// JSON's insignificant whitespace.
fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|&c| is_ws(c)) {
        i += 1;
    }
    i
}

fn only_ws(b: &[u8], i: usize) -> bool {
    b[i..].iter().all(|&c| is_ws(c))
}

/// The string starting with the `"` at `i` and the index after its closing quote, when it has
/// no escape and no control character (which JSON forbids raw).
fn plain_string(text: &str, i: usize) -> Option<(&str, usize)> {
    let b = text.as_bytes();
    if b.get(i) != Some(&b'"') {
        return None;
    }
    // One pass for the closing quote, an escape and a raw control character: arguments are
    // short, and this is cheaper than a `memchr2` and a second check.
    let len = b[i + 1..]
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
    let end = i + 1 + len;
    if b[end] != b'"' {
        return None;
    }
    // Both quotes are ASCII, so the slice falls on character boundaries.
    Some((&text[i + 1..end], end + 1))
}

/// The index after the integer at `i`: an optional `-`, then `0` or up to 15 digits without a
/// leading zero (JSON rejects `01`; longer ones are left to serde).
fn plain_integer(b: &[u8], i: usize) -> Option<usize> {
    let start = if b[i] == b'-' { i + 1 } else { i };
    let digits = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
    let valid = match digits {
        0 => false,
        1 => true,
        n => n <= 15 && b[start] != b'0',
    };
    let end = start + digits;
    // A fraction or exponent follows: serde decides.
    (valid && !matches!(b.get(end), Some(b'.' | b'e' | b'E'))).then_some(end)
}
