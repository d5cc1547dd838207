//! Model Markdown → Slack mrkdwn.
//!
//! Models answer in Markdown; Slack renders its own dialect: `*bold*`, `_italic_`, `~strike~`,
//! `` `code` ``, ```` ``` ```` blocks (no language tag), `<url|text>` links, and `&`, `<`, `>`
//! escaped as `&amp;`, `&lt;`, `&gt;` (a raw `<` would open a link or a mention). Headings
//! become bold lines, list bullets `•`. Anything else stays literal text, escaped.
//!
//! Must not: pass a raw `<`, `>` or `&` through outside the links it builds, or do I/O.

/// Converts one reply chunk (the splitter already balanced its code fences).
pub fn markdown_to_mrkdwn(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_code = false;
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.trim_start().starts_with("```") {
            // Slack shows no language tag: an opening fence keeps only its backticks.
            out.push_str("```");
            in_code = !in_code;
            continue;
        }
        if in_code {
            escape_into(&mut out, line);
            continue;
        }
        block_line(&mut out, line);
    }
    out
}

/// A line outside code: heading, bullet, quote, or plain; then its inline marks.
fn block_line(out: &mut String, line: &str) {
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    let hashes = trimmed.chars().take_while(|&c| c == '#').count();
    if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
        let title = trimmed[hashes..].trim().trim_matches('*');
        out.push('*');
        inline(out, title);
        out.push('*');
        return;
    }
    if let Some(item) = trimmed
        .strip_prefix("- ")
        .or_else(|| trimmed.strip_prefix("* "))
        .or_else(|| trimmed.strip_prefix("+ "))
    {
        out.push_str(indent);
        out.push_str("• ");
        inline(out, item);
        return;
    }
    if let Some(quote) = trimmed.strip_prefix("> ") {
        // A quote is the one `>` Slack reads as markup; it must stay raw.
        out.push_str(indent);
        out.push_str("> ");
        inline(out, quote);
        return;
    }
    inline(out, line);
}

/// Inline marks of one line: code spans, bold, italic, strike, links; the rest escaped.
fn inline(out: &mut String, s: &str) {
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if let Some((consumed, done)) = mark(rest) {
            out.push_str(&done);
            rest = &rest[consumed..];
            continue;
        }
        escape_char(out, c);
        rest = &rest[c.len_utf8()..];
    }
}

/// A mark at the start of `s`: (bytes consumed, converted text), or `None` for plain text.
fn mark(s: &str) -> Option<(usize, String)> {
    if let Some(body) = s.strip_prefix('`') {
        let end = body.find('`').filter(|&e| e > 0)?;
        let mut code = String::from("`");
        escape_into(&mut code, &body[..end]);
        code.push('`');
        return Some((end + 2, code));
    }
    for (open, slack) in [("**", '*'), ("__", '*'), ("~~", '~')] {
        if let Some(inner) = delimited(s, open) {
            return Some((inner.len() + 2 * open.len(), wrapped(slack, inner)));
        }
    }
    for open in ["*", "_"] {
        if let Some(inner) = delimited(s, open) {
            return Some((inner.len() + 2, wrapped('_', inner)));
        }
    }
    if s.starts_with('[') {
        return link(s);
    }
    None
}

/// The text between `open` at the start of `s` and the next `open`, when it is a real mark:
/// not empty, not starting or ending with a space, on one line.
fn delimited<'a>(s: &'a str, open: &str) -> Option<&'a str> {
    let body = s.strip_prefix(open)?;
    let end = body.find(open)?;
    let inner = &body[..end];
    // `**` inside a single-`*` search is the bold mark, not an empty italic.
    let bold_inside_italic = open.len() == 1 && inner.starts_with(open);
    let spaced = inner.starts_with(' ') || inner.ends_with(' ');
    (!inner.is_empty() && !spaced && !bold_inside_italic).then_some(inner)
}

fn wrapped(mark: char, inner: &str) -> String {
    let mut out = String::with_capacity(inner.len() + 2);
    out.push(mark);
    inline(&mut out, inner);
    out.push(mark);
    out
}

/// `[text](url)` with an http(s) or mailto URL → `<url|text>`.
fn link(s: &str) -> Option<(usize, String)> {
    let close = s.find("](")?;
    let text = &s[1..close];
    let after = &s[close + 2..];
    let end = after.find(')')?;
    let url = &after[..end];
    let safe =
        (url.starts_with("https://") || url.starts_with("http://") || url.starts_with("mailto:"))
            && !url.contains(char::is_whitespace);
    if !safe || text.is_empty() {
        return None;
    }
    let mut out = String::from("<");
    for c in url.chars() {
        match c {
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '|' => out.push_str("%7C"),
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
    out.push('|');
    // A link's text cannot carry a `|` or marks of its own in Slack.
    escape_into(&mut out, &text.replace('|', "/"));
    out.push('>');
    Some((close + 2 + end + 1, out))
}

fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        escape_char(out, c);
    }
}

fn escape_char(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        c => out.push(c),
    }
}

/// Plain text for Slack (previews, approval questions): only the three escapes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape_into(&mut out, s);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_table() {
        let cases = [
            ("plain text", "plain text"),
            ("**bold** and __also__", "*bold* and *also*"),
            ("*italic* and _this_", "_italic_ and _this_"),
            ("~~gone~~", "~gone~"),
            ("a `x < y` b", "a `x &lt; y` b"),
            ("1 < 2 & 3 > 2", "1 &lt; 2 &amp; 3 &gt; 2"),
            ("<@U123> <!channel>", "&lt;@U123&gt; &lt;!channel&gt;"),
            (
                "[docs](https://x.io/a?b=1&c=2)",
                "<https://x.io/a?b=1&amp;c=2|docs>",
            ),
            ("[a|b](https://x.io/>)", "<https://x.io/%3E|a/b>"),
            ("[js](javascript:alert(1))", "[js](javascript:alert(1))"),
            ("# Title", "*Title*"),
            ("### **Bold title**", "*Bold title*"),
            ("- one\n  * two", "• one\n  • two"),
            ("> quoted <b>", "> quoted &lt;b&gt;"),
            (
                "```rust\nlet a = b<c>;\n```",
                "```\nlet a = b&lt;c&gt;;\n```",
            ),
            ("2 * 3 * 4", "2 * 3 * 4"),
            ("snake_case_name", "snake_case_name"),
            (
                "**bold with *italic* inside**",
                "*bold with _italic_ inside*",
            ),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(markdown_to_mrkdwn(input), want, "input {input:?}");
        }
    }

    #[test]
    fn escape_plain() {
        assert_eq!(escape("a<b>&c *d*"), "a&lt;b&gt;&amp;c *d*");
    }
}
