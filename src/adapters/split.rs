//! Splits one outgoing reply into chunks that each fit a platform's message limit.
//!
//! Telegram refuses a message longer than 4096 UTF-16 code units, Discord one longer than 2000
//! characters; a long model answer must still arrive whole, in order and readable. Cuts prefer
//! a paragraph break (`\n\n`), then a line break, then a space, and only then a hard cut, which
//! still never splits a character (with [`Measure::Utf16`] an emoji counts 2 and stays whole).
//!
//! Code fences: when a chunk ends inside a ```` ``` ```` block, the chunk gets a closing `\n```
//! ` and the next chunk reopens the block with the same info string (```` ```rust ````, then a
//! newline); those added characters count toward the limit, so every chunk renders as balanced
//! Markdown on its own.
//!
//! What a cut drops, exactly: the one separator the cut was made at — `\n\n`, `\n` or a single
//! space — and nothing at a hard cut. Removing the added fence lines and putting each dropped
//! separator back gives the original text byte for byte, with one exception: a stretch between
//! two cuts that is only whitespace is not sent at all (platforms reject such a message), so
//! whitespace-only input gives no chunk, like empty input.
//!
//! Must not: do I/O, know a platform type, or drop anything but that separator. The guarantees
//! assume a platform-sized limit (≥ 16): an info string longer than a quarter of the limit is not
//! treated as a fence, and a limit too small for one character still yields that character.

/// How a platform counts the length of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// UTF-16 code units (Telegram): characters outside the BMP, like most emoji, count 2.
    Utf16,
    /// Unicode scalar values (Discord).
    Chars,
}

impl Measure {
    fn width(self, c: char) -> usize {
        match self {
            Measure::Utf16 => c.len_utf16(),
            Measure::Chars => 1,
        }
    }

    /// Length of `s` in this measure.
    pub fn len(self, s: &str) -> usize {
        s.chars().map(|c| self.width(c)).sum()
    }
}

/// Telegram's limit for one text message, in UTF-16 code units.
pub const TELEGRAM_LIMIT: usize = 4096;
/// Discord's limit for one message, in characters.
pub const DISCORD_LIMIT: usize = 2000;

const CLOSE_FENCE: &str = "\n```";

/// One line of the original text that opens or closes a fenced code block.
struct FenceLine {
    /// Byte offset of the line start.
    start: usize,
    /// Byte offset of the line end, before its `\n`.
    end: usize,
    /// The info string when this line opens a block, `None` when it closes one.
    opens: Option<String>,
}

/// Splits `text` into chunks of at most `limit` in `measure`; empty input gives no chunk.
pub fn split_message(text: &str, limit: usize, measure: Measure) -> Vec<String> {
    let fences = scan_fences(text, limit, measure);
    let mut chunks = Vec::new();
    let mut pos = 0;
    while pos < text.len() {
        let reopen = open_fence_at(&fences, pos).map(|info| format!("```{info}\n"));
        let prefix = reopen.unwrap_or_default();
        let room = limit.saturating_sub(measure.len(&prefix));
        let (mut end, mut next) = choose_cut(text, pos, room, measure, &fences);
        let mut close = end < text.len() && open_fence_at(&fences, end).is_some();
        if close {
            // The closing fence must fit too, so look again with less room; the new cut may
            // land before the block opened, in which case no closing fence is needed.
            let room = room.saturating_sub(measure.len(CLOSE_FENCE));
            (end, next) = choose_cut(text, pos, room, measure, &fences);
            close = end < text.len() && open_fence_at(&fences, end).is_some();
        }
        // Platforms refuse a message of only whitespace, so such a stretch is not sent.
        if !text[pos..end].trim().is_empty() {
            let mut chunk = prefix;
            chunk.push_str(&text[pos..end]);
            if close {
                chunk.push_str(CLOSE_FENCE);
            }
            chunks.push(chunk);
        }
        pos = next;
    }
    chunks
}

/// Finds the fence lines of `text`, CommonMark-style: a line whose first non-blank characters are
/// three backticks opens a block; inside a block, a line of only backticks closes it.
fn scan_fences(text: &str, limit: usize, measure: Measure) -> Vec<FenceLine> {
    let mut fences = Vec::new();
    let mut inside = false;
    let mut start = 0;
    for line in text.split('\n') {
        let end = start + line.len();
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            let info = trimmed.trim_start_matches('`').trim();
            if inside && info.is_empty() {
                fences.push(FenceLine {
                    start,
                    end,
                    opens: None,
                });
                inside = false;
            } else if !inside && measure.len(info) <= limit / 4 {
                fences.push(FenceLine {
                    start,
                    end,
                    opens: Some(info.to_owned()),
                });
                inside = true;
            }
        }
        start = end + 1;
    }
    fences
}

/// The info string of the block open at byte `offset` (fence lines starting before it count).
fn open_fence_at(fences: &[FenceLine], offset: usize) -> Option<&str> {
    let before = fences.partition_point(|f| f.start < offset);
    before
        .checked_sub(1)
        .and_then(|i| fences[i].opens.as_deref())
}

/// True when a cut at `offset` would split a fence line in two.
fn inside_fence_line(fences: &[FenceLine], offset: usize) -> bool {
    let before = fences.partition_point(|f| f.start < offset);
    before
        .checked_sub(1)
        .is_some_and(|i| offset < fences[i].end)
}

/// Picks where the chunk starting at `pos` ends: returns (end of the chunk's text, start of the
/// next chunk); the bytes between are the dropped separator.
fn choose_cut(
    text: &str,
    pos: usize,
    room: usize,
    measure: Measure,
    fences: &[FenceLine],
) -> (usize, usize) {
    let mut used = 0;
    let mut max_end = pos;
    for (i, c) in text[pos..].char_indices() {
        used += measure.width(c);
        if used > room {
            break;
        }
        max_end = pos + i + c.len_utf8();
    }
    if max_end == text.len() {
        return (max_end, max_end);
    }
    if max_end == pos {
        // Not even one character fits: send it anyway rather than loop forever.
        let width = text[pos..].chars().next().map_or(1, char::len_utf8);
        return (pos + width, pos + width);
    }
    // A separator early in the window would make a needlessly short chunk, so the preferred
    // kinds must sit in its second half; failing that, any line break or space beats a hard cut.
    let half = pos + (max_end - pos) / 2;
    let preferred = [
        ("\n\n", half),
        ("\n", half),
        (" ", half),
        ("\n", pos + 1),
        (" ", pos + 1),
    ];
    for (sep, earliest) in preferred {
        if let Some(s) = last_separator(text, earliest.max(pos + 1), max_end, sep, fences) {
            return (s, s + sep.len());
        }
    }
    let mut end = max_end;
    let before = fences.partition_point(|f| f.start < end);
    if let Some(f) = before.checked_sub(1).map(|i| &fences[i]) {
        if end < f.end && f.start > pos {
            end = f.start;
        }
    }
    (end, end)
}

/// The last offset in `earliest..=latest` where `sep` starts and a cut keeps fence lines whole.
fn last_separator(
    text: &str,
    earliest: usize,
    latest: usize,
    sep: &str,
    fences: &[FenceLine],
) -> Option<usize> {
    let bytes = text.as_bytes();
    // Separators are ASCII, so any offset where one matches is a character boundary.
    (earliest..=latest)
        .rev()
        .find(|&s| bytes[s..].starts_with(sep.as_bytes()) && !inside_fence_line(fences, s))
}

#[cfg(test)]
#[path = "split_tests.rs"]
mod tests;
