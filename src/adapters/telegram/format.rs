//! Model Markdown → Telegram HTML, the safe subset.
//!
//! Models answer in Markdown; Telegram renders either its own MarkdownV2 (where a stray `.` or
//! `-` unescaped fails the whole message) or a small HTML dialect. HTML is the safer target:
//! every character is escaped first and only balanced tags we generate ourselves are added, so
//! the output always parses. Supported: fenced code blocks, inline code, `**bold**`, `# headings`
//! (as bold lines) and `[text](http…)` links. Anything else stays literal text.
//!
//! Must not: emit an unbalanced tag, pass a raw `<`, `>` or `&` through, or make the visible
//! text longer than the input (the splitter measured the input against Telegram's limit).

/// Converts one reply chunk. Each chunk is converted on its own: the splitter already closes a
/// code fence at the end of a chunk and reopens it in the next.
pub fn markdown_to_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut code: Option<(String, String)> = None; // (language, body)
    let mut first = true;
    for line in text.split('\n') {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut code, fence) {
            (Some((lang, body)), Some(rest)) if rest.trim().is_empty() => {
                push_line_break(&mut out, &mut first);
                push_pre(&mut out, lang, body);
                code = None;
            }
            (Some((_, body)), _) => {
                if !body.is_empty() {
                    body.push('\n');
                }
                body.push_str(line);
            }
            (None, Some(info)) => {
                code = Some((info.trim().to_string(), String::new()));
            }
            (None, None) => {
                push_line_break(&mut out, &mut first);
                inline(&mut out, line);
            }
        }
    }
    if let Some((lang, body)) = code {
        // An unclosed fence (cannot happen after the splitter, but input is the model's): close it.
        push_line_break(&mut out, &mut first);
        push_pre(&mut out, &lang, &body);
    }
    out
}

fn push_line_break(out: &mut String, first: &mut bool) {
    if !*first {
        out.push('\n');
    }
    *first = false;
}

fn push_pre(out: &mut String, lang: &str, body: &str) {
    let safe_lang = !lang.is_empty()
        && lang
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_' | '#' | '.'));
    if safe_lang {
        out.push_str("<pre><code class=\"language-");
        out.push_str(lang);
        out.push_str("\">");
        escape_into(out, body);
        out.push_str("</code></pre>");
    } else {
        out.push_str("<pre>");
        escape_into(out, body);
        out.push_str("</pre>");
    }
}

/// One line outside code blocks.
fn inline(out: &mut String, line: &str) {
    let trimmed = line.trim_start_matches('#');
    let hashes = line.len() - trimmed.len();
    if (1..=6).contains(&hashes) && trimmed.starts_with(' ') && !trimmed.trim().is_empty() {
        out.push_str("<b>");
        spans(out, trimmed.trim());
        out.push_str("</b>");
        return;
    }
    spans(out, line);
}

/// Inline code, bold and links; everything else escaped.
fn spans(out: &mut String, s: &str) {
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('`') {
            if let Some(end) = after.find('`').filter(|&e| e > 0) {
                out.push_str("<code>");
                escape_into(out, &after[..end]);
                out.push_str("</code>");
                rest = &after[end + 1..];
                continue;
            }
        }
        if let Some(after) = rest.strip_prefix("**") {
            if let Some(end) = after.find("**").filter(|&e| e > 0) {
                let inner = &after[..end];
                if !inner.contains('`') {
                    out.push_str("<b>");
                    escape_into(out, inner);
                    out.push_str("</b>");
                    rest = &after[end + 2..];
                    continue;
                }
            }
        }
        if rest.starts_with('[') {
            if let Some((label, url, used)) = link(rest) {
                out.push_str("<a href=\"");
                escape_into(out, url);
                out.push_str("\">");
                escape_into(out, label);
                out.push_str("</a>");
                rest = &rest[used..];
                continue;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        let mut buf = [0u8; 4];
        escape_into(out, c.encode_utf8(&mut buf));
        rest = &rest[c.len_utf8()..];
    }
}

/// `[label](http(s)://url)` at the start of `s`: (label, url, bytes used).
fn link(s: &str) -> Option<(&str, &str, usize)> {
    let close = s.find("](")?;
    let label = &s[1..close];
    if label.is_empty() || label.contains(['[', ']', '`']) {
        return None;
    }
    let after = &s[close + 2..];
    let end = after.find(')')?;
    let url = &after[..end];
    let ok = (url.starts_with("https://") || url.starts_with("http://"))
        && !url.contains(char::is_whitespace);
    ok.then_some((label, url, close + 2 + end + 1))
}

fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::markdown_to_html;

    #[test]
    fn conversion_table() {
        let cases: &[(&str, &str)] = &[
            ("plain text", "plain text"),
            ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
            ("<b>not a tag</b>", "&lt;b&gt;not a tag&lt;/b&gt;"),
            ("use `x<y>` here", "use <code>x&lt;y&gt;</code> here"),
            ("**bold** and **more**", "<b>bold</b> and <b>more</b>"),
            ("a ** b", "a ** b"),
            ("unclosed `tick", "unclosed `tick"),
            ("snake_case_name *x*", "snake_case_name *x*"),
            ("# Title\nbody", "<b>Title</b>\nbody"),
            ("#hashtag", "#hashtag"),
            (
                "see [docs](https://example.org/a?b=1&c=2)",
                "see <a href=\"https://example.org/a?b=1&amp;c=2\">docs</a>",
            ),
            ("[js](javascript:alert(1))", "[js](javascript:alert(1))"),
            (
                "```rust\nfn f() -> u8 { 1 }\n```\ndone",
                "<pre><code class=\"language-rust\">fn f() -&gt; u8 { 1 }</code></pre>\ndone",
            ),
            ("```\n<x>\n```", "<pre>&lt;x&gt;</pre>"),
            ("```\"><script>\nx\n```", "<pre>x</pre>"),
            (
                "```py\nopen",
                "<pre><code class=\"language-py\">open</code></pre>",
            ),
            ("emoji 😀 stays", "emoji 😀 stays"),
        ];
        for (input, want) in cases {
            assert_eq!(markdown_to_html(input), *want, "input {input:?}");
        }
    }

    /// What Telegram shows after parsing must never be longer than what the splitter measured.
    #[test]
    fn visible_text_never_grows() {
        let inputs = [
            "a & b < c",
            "```rust\nlet x = 1 < 2;\n```",
            "**b** `c` [l](https://x.y) # h",
            "😀😀 &&& <<<",
        ];
        for input in inputs {
            let html = markdown_to_html(input);
            let visible = strip_tags_and_unescape(&html);
            assert!(
                visible.encode_utf16().count() <= input.encode_utf16().count(),
                "{input:?} -> {visible:?}"
            );
        }
    }

    fn strip_tags_and_unescape(html: &str) -> String {
        let mut out = String::new();
        let mut in_tag = false;
        for c in html.chars() {
            match c {
                '<' => in_tag = true,
                '>' if in_tag => in_tag = false,
                _ if !in_tag => out.push(c),
                _ => {}
            }
        }
        out.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&amp;", "&")
    }
}
