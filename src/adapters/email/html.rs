//! Markdown → the HTML part of a reply, sanitised: pulldown-cmark renders CommonMark, and the
//! HTML a model (or someone it quotes) writes is never passed through: raw HTML becomes text,
//! and a link or image is kept only for `http`, `https` and `mailto` addresses (images become
//! links: a mail client would fetch them from wherever they point).

use pulldown_cmark::{html, CowStr, Event, Options, Parser, Tag};

/// The HTML body of a reply written in Markdown.
pub fn markdown_to_html(text: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let events = Parser::new_ext(text, options).map(|e| match e {
        Event::Html(raw) => Event::Text(raw),
        Event::Start(Tag::Link(kind, url, title)) => {
            Event::Start(Tag::Link(kind, safe(url), title))
        }
        Event::End(Tag::Link(kind, url, title)) => Event::End(Tag::Link(kind, safe(url), title)),
        Event::Start(Tag::Image(kind, url, title)) => {
            Event::Start(Tag::Link(kind, safe(url), title))
        }
        Event::End(Tag::Image(kind, url, title)) => Event::End(Tag::Link(kind, safe(url), title)),
        other => other,
    });
    let mut out = String::with_capacity(text.len() * 3 / 2 + 64);
    html::push_html(&mut out, events);
    format!("<!DOCTYPE html><html><body>{out}</body></html>")
}

fn safe(url: CowStr<'_>) -> CowStr<'_> {
    let lower = url.trim().to_ascii_lowercase();
    if ["http://", "https://", "mailto:"]
        .iter()
        .any(|s| lower.starts_with(s))
    {
        url
    } else {
        CowStr::Borrowed("")
    }
}

#[cfg(test)]
mod tests {
    use super::markdown_to_html;

    #[test]
    fn markdown_renders_and_html_does_not_pass() {
        let h =
            markdown_to_html("**Yes** and `code`\n\n- one\n- two\n\n<img src=x onerror=alert(1)>");
        assert!(h.contains("<strong>Yes</strong>"), "{h}");
        assert!(h.contains("<code>code</code>"), "{h}");
        assert!(h.contains("<li>one</li>"), "{h}");
        assert!(!h.contains("<img"), "{h}");
        assert!(h.contains("&lt;img"), "{h}");
    }

    #[test]
    fn only_web_and_mail_links_survive() {
        let h = markdown_to_html("[a](https://example.org) [b](javascript:alert(1)) ![c](data:x)");
        assert!(h.contains("href=\"https://example.org\""), "{h}");
        assert!(!h.contains("javascript:"), "{h}");
        assert!(!h.contains("data:x"), "{h}");
        assert!(!h.contains("<img"), "{h}");
    }
}
