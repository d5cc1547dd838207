//! Model Markdown → Matrix's `formatted_body` (`org.matrix.custom.html`), sanitised.
//!
//! The HTML comes only from the CommonMark renderer (pulldown-cmark): raw HTML the model wrote
//! is escaped as text, a link keeps only an `http`, `https` or `mailto` target (anything else,
//! `javascript:` above all, becomes plain text), and an image becomes a link to it (Matrix
//! clients show `<img>` only from `mxc://`). The plain `body` beside it is the Markdown itself,
//! which reads well in a client without HTML.
//!
//! Must not: emit a tag the renderer did not make, or a link with a scheme outside the list.

use pulldown_cmark::{html, CowStr, Event, LinkType, Options, Parser, Tag};

/// The `formatted_body` for one chunk, or `None` when the chunk is plain text (no Markdown, no
/// character HTML would escape): then `body` alone is sent.
pub fn markdown_to_html(text: &str) -> Option<String> {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TABLES);
    let events = Parser::new_ext(text, options).map(sanitise);
    let mut out = String::with_capacity(text.len() + 32);
    html::push_html(&mut out, events);
    let out = out.trim_end().to_string();
    let plain = format!("<p>{}</p>", escape(text.trim()));
    (out != plain).then_some(out)
}

fn sanitise(event: Event<'_>) -> Event<'_> {
    match event {
        Event::Html(raw) => Event::Text(raw),
        Event::Start(Tag::Link(kind, dest, title)) => {
            Event::Start(Tag::Link(kind, safe_url(dest), title))
        }
        Event::End(Tag::Link(kind, dest, title)) => {
            Event::End(Tag::Link(kind, safe_url(dest), title))
        }
        Event::Start(Tag::Image(_, dest, title)) => {
            Event::Start(Tag::Link(LinkType::Inline, safe_url(dest), title))
        }
        Event::End(Tag::Image(_, dest, title)) => {
            Event::End(Tag::Link(LinkType::Inline, safe_url(dest), title))
        }
        other => other,
    }
}

/// The link target if its scheme is allowed, else an empty one (the text stays, unlinked).
fn safe_url(dest: CowStr<'_>) -> CowStr<'_> {
    let lower = dest.trim().to_ascii_lowercase();
    if ["http://", "https://", "mailto:"]
        .iter()
        .any(|s| lower.starts_with(s))
    {
        dest
    } else {
        CowStr::Borrowed("")
    }
}

/// HTML-escapes text the way the renderer escapes it.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    html::push_html(
        &mut out,
        std::iter::once(Event::Text(CowStr::Borrowed(text))),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::markdown_to_html;

    #[test]
    fn plain_text_has_no_formatted_body() {
        assert_eq!(markdown_to_html("reply to: hello there"), None);
        assert_eq!(markdown_to_html("word0 word1 word2"), None);
    }

    #[test]
    fn markdown_becomes_html() {
        let html = markdown_to_html("**bold** and `code`\n\n- one\n- two").unwrap();
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(html.contains("<li>one</li>"), "{html}");
        let code = markdown_to_html("```rust\nfn main() {}\n```").unwrap();
        assert!(
            code.contains("<pre><code class=\"language-rust\">"),
            "{code}"
        );
    }

    #[test]
    fn raw_html_and_bad_links_are_neutralised() {
        let html = markdown_to_html("<script>alert(1)</script> and <b onclick=x>hi</b>").unwrap();
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<b "), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        let link =
            markdown_to_html("[click](javascript:alert(1)) [ok](https://example.org)").unwrap();
        assert!(!link.contains("javascript"), "{link}");
        assert!(link.contains("href=\"https://example.org\""), "{link}");
        let img = markdown_to_html("![cat](https://example.org/cat.png)").unwrap();
        assert!(!img.contains("<img"), "{img}");
        assert!(
            img.contains("<a href=\"https://example.org/cat.png\">cat</a>"),
            "{img}"
        );
    }
}
