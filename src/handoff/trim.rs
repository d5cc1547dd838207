//! Cuts a capsule down to its character cap from the middle, never from the end.
//!
//! A plain truncation removes `## Pointers` and `## Next` first, the two sections the next
//! session cannot reconstruct; so the tail is kept and the head is cut. The cut is visible (a
//! marker line saying how much went), the marker counts against the cap, and lengths are
//! Unicode scalar values, never bytes. This module must not split a character and must never
//! return more than the cap.

/// Fraction of the cap a kept tail may take: the head (`## Working on`) needs the rest.
const TAIL_SHARE_NUM: usize = 3;
const TAIL_SHARE_DEN: usize = 5;
/// In a plain head/tail cut, the share kept from the start; the rest comes from the end,
/// where the latest state of a conversation lives.
const HEAD_SHARE_NUM: usize = 2;
const HEAD_SHARE_DEN: usize = 5;
/// How far back (in chars) a cut may move to land on a line boundary instead of mid-line.
const LINE_SNAP_CHARS: usize = 200;

/// The marker placed where text was removed, with its surrounding blank lines.
pub fn trim_marker(removed_chars: usize) -> String {
    format!("\n\n[… {removed_chars} characters trimmed from the middle …]\n\n")
}

/// Returns `text` unchanged when it has at most `cap_chars` characters; otherwise a middle cut
/// of at most `cap_chars` characters.
///
/// Preference order for what survives at the end: the tail from the last `## Pointers` heading,
/// then from the last `## Next` heading (each only when it does not open the text and takes at
/// most 0.6 × cap), else a plain cut keeping 40 % head and 60 % tail. A cap too small to hold
/// the marker yields a bare head cut.
pub fn trim_capsule(text: &str, cap_chars: usize) -> String {
    let total = text.chars().count();
    if total <= cap_chars {
        return text.to_string();
    }
    let tail_max = cap_chars * TAIL_SHARE_NUM / TAIL_SHARE_DEN;
    let section_tail = ["## Pointers", "## Next"]
        .iter()
        .filter_map(|heading| heading_tail_chars(text, heading, total))
        .find(|&tail| tail <= tail_max);

    if let Some(tail) = section_tail {
        if let Some(head) = head_budget(total, cap_chars, tail) {
            return splice(text, total, cap_chars, head, tail, false);
        }
    }
    match head_budget(total, cap_chars, 0) {
        Some(keep) => {
            let head = keep * HEAD_SHARE_NUM / HEAD_SHARE_DEN;
            splice(text, total, cap_chars, head, keep - head, true)
        }
        None => text.chars().take(cap_chars).collect(),
    }
}

/// Characters from the last line-start occurrence of `heading` to the end, when that
/// occurrence is not at the very start (a tail that is the whole text saves nothing).
fn heading_tail_chars(text: &str, heading: &str, total: usize) -> Option<usize> {
    let byte = text
        .match_indices(heading)
        .map(|(i, _)| i)
        .filter(|&i| i > 0 && text.as_bytes()[i - 1] == b'\n')
        .last()?;
    Some(total - text[..byte].chars().count())
}

/// Head characters that fit beside a `tail`-char tail and the marker, or `None` when not even
/// the marker fits. The marker's digit count depends on what is removed, which depends on the
/// head; sizing it first for the largest possible count and then once more for the actual one
/// is enough, because fewer removed characters never need more digits.
fn head_budget(total: usize, cap: usize, tail: usize) -> Option<usize> {
    let widest = marker_chars(total);
    let first = cap.checked_sub(tail + widest)?;
    let actual = marker_chars(total - first - tail);
    Some(cap - tail - actual)
}

fn marker_chars(removed: usize) -> usize {
    trim_marker(removed).chars().count()
}

/// Joins the first `head` and last `tail` characters around a marker. When `snap_tail` is set,
/// the tail may start a little later so it opens on a whole line; the head may end a little
/// earlier so it closes on one. A snap is dropped if it would push the result over the cap.
fn splice(
    text: &str,
    total: usize,
    cap: usize,
    head: usize,
    tail: usize,
    snap_tail: bool,
) -> String {
    let head_end = byte_at(text, head);
    let tail_start = byte_at(text, total - tail);
    let exact = join(text, head_end, tail_start);

    let snapped_head = snap_back_to_line(text, head_end);
    let snapped_tail = if snap_tail {
        snap_forward_to_line(text, tail_start)
    } else {
        tail_start
    };
    if (snapped_head, snapped_tail) == (head_end, tail_start) {
        return exact;
    }
    let snapped = join(text, snapped_head, snapped_tail);
    if snapped.chars().count() <= cap && snapped_tail < text.len() {
        snapped
    } else {
        exact
    }
}

fn join(text: &str, head_end: usize, tail_start: usize) -> String {
    let removed = text[head_end..tail_start].chars().count();
    let mut out = String::with_capacity(head_end + (text.len() - tail_start) + 64);
    out.push_str(&text[..head_end]);
    out.push_str(&trim_marker(removed));
    out.push_str(&text[tail_start..]);
    out
}

/// Byte offset of the `chars`-th character (or the end).
fn byte_at(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map_or(text.len(), |(byte, _)| byte)
}

/// Moves a head cut back to just after the previous newline when one is close.
fn snap_back_to_line(text: &str, end: usize) -> usize {
    let head = &text[..end];
    if head.is_empty() || head.ends_with('\n') {
        return end;
    }
    match head.rfind('\n') {
        Some(nl) if head[nl..].chars().count() <= LINE_SNAP_CHARS => nl + 1,
        _ => end,
    }
}

/// Moves a tail cut forward to the start of the next line when one is close.
fn snap_forward_to_line(text: &str, start: usize) -> usize {
    if start == 0 || text.as_bytes()[start - 1] == b'\n' {
        return start;
    }
    let rest = &text[start..];
    match rest.find('\n') {
        Some(nl) if rest[..nl].chars().count() <= LINE_SNAP_CHARS => start + nl + 1,
        _ => start,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: usize = 12_000;

    fn chars(s: &str) -> usize {
        s.chars().count()
    }

    fn has_marker(s: &str) -> bool {
        s.contains("characters trimmed from the middle")
    }

    /// A capsule whose State section is padded so the whole is exactly `total` chars.
    fn capsule_of(total: usize) -> String {
        let start = "# Handoff\n\n## Working on\nFixing the nightly mirror job.\n\n## State\n";
        let end = "\n## Decisions\nSkip unreachable hosts and report them.\n\n\
                   ## Pointers\n- scripts/mirror.sh line 42\n- message #311\n\n\
                   ## Next\nRun the job against host B and check the skip report.\n";
        let pad = total - chars(start) - chars(end);
        let line = "host A synced; host B timed out after 30 s; retried twice.\n";
        let mut state: String = line.repeat(pad / chars(line) + 1);
        state.truncate(pad);
        let out = format!("{start}{state}{end}");
        assert_eq!(chars(&out), total);
        out
    }

    #[test]
    fn capsule_of_12564_chars_keeps_head_pointers_next_and_marker() {
        let input = capsule_of(12_564);
        let out = trim_capsule(&input, CAP);
        assert!(chars(&out) <= CAP, "got {} chars", chars(&out));
        let floor = CAP - LINE_SNAP_CHARS - 2;
        assert!(
            chars(&out) >= floor,
            "cut far too much: {} chars",
            chars(&out)
        );
        for heading in ["## Working on", "## Pointers", "## Next"] {
            assert!(out.contains(heading), "lost {heading}");
        }
        assert!(has_marker(&out));
        assert!(out.ends_with("check the skip report.\n"));
        assert_eq!(
            removed_in(&out) + chars(&out) - chars(&trim_marker(removed_in(&out))),
            12_564
        );
    }

    /// The count the marker in `out` reports.
    fn removed_in(out: &str) -> usize {
        let start = out.find("[… ").expect("marker");
        let digits: String = out[start + "[… ".len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().expect("count")
    }

    #[test]
    fn marker_reports_exactly_what_was_removed() {
        for total in [12_001, 20_000, 120_000] {
            let out = trim_capsule(&capsule_of(total), CAP);
            let removed = removed_in(&out);
            assert_eq!(chars(&out) - chars(&trim_marker(removed)) + removed, total);
        }
    }

    #[test]
    fn under_and_at_cap_are_returned_unchanged() {
        for text in ["", "short", "## Working on\nx\n## Next\ny"] {
            assert_eq!(trim_capsule(text, CAP), text);
        }
        let exactly = capsule_of(CAP);
        assert_eq!(trim_capsule(&exactly, CAP), exactly);
        let emoji = "🦀".repeat(CAP); // 48,000 bytes but 12,000 chars: not over the cap
        assert_eq!(trim_capsule(&emoji, CAP), emoji);
    }

    #[test]
    fn result_never_exceeds_cap_table() {
        // (total chars, cap): around digit-count boundaries of the marker and tiny caps
        let cases = [
            (12_001, CAP),
            (12_564, CAP),
            (22_999, CAP),
            (23_000, CAP),
            (300_000, CAP),
            (1_000, 999),
            (1_100, 100),
            (500, 60),
            (500, 10),
            (500, 0),
        ];
        for (total, cap) in cases {
            let input = "word and more words\n".repeat(total / 20 + 1);
            let input: String = input.chars().take(total).collect();
            let out = trim_capsule(&input, cap);
            assert!(
                chars(&out) <= cap,
                "total {total} cap {cap}: got {}",
                chars(&out)
            );
            if cap >= 100 {
                assert!(has_marker(&out), "total {total} cap {cap}: no marker");
            }
        }
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries_and_counted_in_chars() {
        let cases = [
            ("🦀🚀✅", 30_000),
            ("漢字かな交じり文。", 20_000),
            ("e\u{301}x", 15_000),
            ("a🦀b", 13_333),
        ];
        for (unit, total) in cases {
            let input: String = unit.chars().cycle().take(total).collect();
            let out = trim_capsule(&input, CAP);
            // `out` is a String, so every byte sequence is valid UTF-8; the point is the count.
            assert!(chars(&out) <= CAP, "{unit}: {} chars", chars(&out));
            assert!(chars(&out) >= CAP - 2, "{unit}: {} chars", chars(&out));
            assert!(out.len() > CAP, "{unit}: bytes should exceed chars");
            assert!(has_marker(&out));
            let unit_chars: Vec<char> = unit.chars().collect();
            assert!(out.starts_with(unit_chars[0]));
        }
    }

    #[test]
    fn pointers_tail_too_long_falls_back_to_next_tail() {
        let mut input =
            String::from("## Working on\nthe thing\n\n## State\nshort\n\n## Pointers\n");
        input.push_str(&"- a pointer line\n".repeat(800)); // 13,600 chars > 0.6 × cap
        input.push_str("\n## Next\nDo the next step.\n");
        assert!(chars(&input) > CAP);
        let out = trim_capsule(&input, CAP);
        assert!(chars(&out) <= CAP);
        assert!(out.starts_with("## Working on\nthe thing"));
        assert!(out.ends_with("\n## Next\nDo the next step.\n"));
        assert!(has_marker(&out));
    }

    #[test]
    fn no_headings_gives_head_and_tail_with_marker() {
        let lines: Vec<String> = (0..2_000)
            .map(|i| format!("line {i:04} of the log"))
            .collect();
        let input = lines.join("\n");
        let out = trim_capsule(&input, CAP);
        assert!(chars(&out) <= CAP);
        assert!(out.starts_with("line 0000 of the log\n"));
        assert!(out.ends_with("line 1999 of the log"));
        let (head, tail) = out.split_once("[… ").expect("marker");
        // cut on whole lines on both sides of the marker
        assert!(
            head.ends_with("of the log\n\n\n"),
            "head ends {:?}",
            &head[head.len() - 20..]
        );
        let after = tail.split_once("…]\n\n").expect("marker end").1;
        assert!(after.starts_with("line "), "tail starts {:?}", &after[..20]);
        assert!(
            chars(head) < chars(after),
            "the tail keeps more than the head"
        );
    }

    #[test]
    fn pointers_at_the_very_start_is_not_a_usable_tail() {
        let mut input = String::from("## Pointers\n");
        input.push_str(&"x".repeat(13_000));
        input.push_str("\nthe end");
        let out = trim_capsule(&input, CAP);
        assert!(chars(&out) <= CAP);
        assert!(out.starts_with("## Pointers\n"));
        assert!(out.ends_with("the end"));
        assert!(has_marker(&out));
    }

    #[test]
    fn heading_inside_a_line_is_not_a_section() {
        let mut input = String::from("## Working on\n");
        input.push_str(&"y".repeat(13_000));
        input.push_str(" see ## Next in the doc\nlast line");
        let out = trim_capsule(&input, CAP);
        assert!(chars(&out) <= CAP);
        // plain cut: 60 % of the kept text is tail, far more than the mid-line "## Next" tail
        assert!(chars(out.split("…]").nth(1).expect("marker")) > 6_000);
    }
}
