//! What the model reads of a mail body: the new words, without the quoted history a reply
//! carries below them or the signature. The stored event keeps the whole body; this is only
//! the text the turn sees.
//!
//! Cut at the first line of any of: a `> ` quote, an attribution (`On … wrote:`), Outlook's
//! `-----Original Message-----` or underscore rule, a forwarded header block (`From:` after a
//! blank line), the signature separator `-- `. A body that is nothing but quotes is kept whole
//! (someone forwarding a thread still said something).

/// The body as the model should read it.
pub fn new_words(body: &str) -> String {
    let lines: Vec<&str> = body.lines().collect();
    let mut keep = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_end();
        let blank_before = i == 0 || lines[i - 1].trim().is_empty();
        if t.starts_with('>')
            || t == "--"
            || t == "-- "
            || line.trim_end_matches('\r') == "-- "
            || is_attribution(t, lines.get(i + 1).copied())
            || t.trim().eq_ignore_ascii_case("-----original message-----")
            || (t.len() >= 20 && t.trim().chars().all(|c| c == '_'))
            || (blank_before && t.starts_with("From: ") && i > 0)
        {
            break;
        }
        keep.push(t);
    }
    let text = keep.join("\n").trim().to_string();
    if text.is_empty() {
        body.trim().to_string()
    } else {
        text
    }
}

/// `On Mon, 7 Dec 2026 at 10:00, Alice <a@x> wrote:`, possibly wrapped onto two lines.
fn is_attribution(line: &str, next: Option<&str>) -> bool {
    let t = line.trim();
    let starts = ["On ", "Le ", "Am ", "El "]
        .iter()
        .any(|p| t.starts_with(p));
    let ends = |s: &str| {
        let s = s.trim_end();
        ["wrote:", "a écrit :", "a écrit:", "schrieb:", "escribió:"]
            .iter()
            .any(|w| s.ends_with(w))
    };
    starts && (ends(t) || next.is_some_and(|n| ends(n) && n.len() < 80))
}

#[cfg(test)]
mod tests {
    use super::new_words;

    #[test]
    fn quotes_attributions_and_signatures_are_cut() {
        let cases = [
            (
                "Yes, Friday.\n\nOn Mon, 7 Dec 2026, Herald <h@x> wrote:\n> When?\n",
                "Yes, Friday.",
            ),
            ("Yes.\n> old\n> older\n", "Yes."),
            ("Thanks!\n-- \nAlice\nACME Corp\n", "Thanks!"),
            ("Fine\n\n-----Original Message-----\nFrom: h@x\n", "Fine"),
            (
                "Ok\n\nOn Mon, 7 Dec 2026 at 10:00, Herald\n<h@x> wrote:\n> q\n",
                "Ok",
            ),
            ("Sure\n\nFrom: Herald <h@x>\nSent: Monday\n", "Sure"),
            ("plain text\nwith two lines", "plain text\nwith two lines"),
        ];
        for (body, want) in cases {
            assert_eq!(new_words(body), want, "{body:?}");
        }
    }

    #[test]
    fn a_body_of_only_quotes_is_kept() {
        assert_eq!(new_words("> forwarded\n> words\n"), "> forwarded\n> words");
    }
}
