//! One raw message (RFC 5322 bytes, as IMAP hands it over) → [`Mail`], the few facts Herald
//! needs of it, through mail-parser: MIME parts, quoted-printable and base64, charsets, and
//! HTML-only mail turned into text. No I/O; mail-parser's types stay in this file.
//!
//! Must not: trust anything a sender can write without the receiving server's word for it
//! (that is `auth.rs`, over the topmost Authentication-Results only).

use chrono::{DateTime, TimeZone, Utc};
use mail_parser::{HeaderValue, MessageParser, MimeHeaders};

/// A message, as far as Herald reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mail {
    /// The Message-ID without its angle brackets.
    pub message_id: Option<String>,
    /// The From address, lower-cased.
    pub from: Option<String>,
    pub from_name: Option<String>,
    pub subject: String,
    pub in_reply_to: Option<String>,
    /// References, oldest first (the thread's root is the first).
    pub references: Vec<String>,
    pub date: Option<DateTime<Utc>>,
    /// The whole text: the plain part, or the HTML part turned into text.
    pub body: String,
    /// Why this is an automatic message (an auto-reply, a bounce, bulk mail), if it is one.
    pub automatic: Option<&'static str>,
    /// The topmost Authentication-Results header: the receiving server's verdict.
    pub auth_results: Option<String>,
    pub files: Vec<MailFile>,
}

/// A file attached to a message.
#[derive(Clone, PartialEq)]
pub struct MailFile {
    pub name: String,
    pub mime: String,
    pub bytes: Vec<u8>,
}

impl std::fmt::Debug for MailFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MailFile({:?}, {}, {} bytes)",
            self.name,
            self.mime,
            self.bytes.len()
        )
    }
}

impl Mail {
    /// The thread's root: the first of References, else In-Reply-To, else this message.
    pub fn thread_root(&self) -> Option<&str> {
        self.references
            .first()
            .or(self.in_reply_to.as_ref())
            .or(self.message_id.as_ref())
            .map(String::as_str)
    }
}

/// Reads a message; `None` when the bytes are not a message at all.
pub fn parse(raw: &[u8]) -> Option<Mail> {
    let msg = MessageParser::default().parse(raw)?;
    let from = msg.from().and_then(|a| a.first());
    let mut mail = Mail {
        message_id: msg.message_id().map(bare_id).filter(|s| !s.is_empty()),
        from: from
            .and_then(|a| a.address())
            .map(|a| a.trim().to_lowercase()),
        from_name: from
            .and_then(|a| a.name())
            .map(str::to_string)
            .filter(|n| !n.trim().is_empty()),
        subject: msg.subject().unwrap_or("").trim().to_string(),
        in_reply_to: ids(msg.in_reply_to()).into_iter().next(),
        references: ids(msg.references()),
        date: msg
            .date()
            .and_then(|d| Utc.timestamp_opt(d.to_timestamp(), 0).single()),
        body: body(&msg),
        ..Mail::default()
    };
    let headers: Vec<(String, String)> = msg
        .headers_raw()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    mail.auth_results = headers
        .iter()
        .find(|(n, _)| n == "authentication-results")
        .map(|(_, v)| unfold(v));
    let ctype = msg
        .root_part()
        .content_type()
        .map(|c| format!("{}/{}", c.ctype(), c.subtype().unwrap_or("")).to_lowercase());
    mail.automatic = automatic(&headers, mail.from.as_deref(), ctype.as_deref());
    for (i, part) in msg.attachments().enumerate() {
        let mime = part
            .content_type()
            .map(|c| match c.subtype() {
                Some(s) => format!("{}/{s}", c.ctype()),
                None => c.ctype().to_string(),
            })
            .unwrap_or_else(|| "application/octet-stream".into())
            .to_lowercase();
        let name = part
            .attachment_name()
            .map(str::to_string)
            .unwrap_or_else(|| format!("attachment-{}", i + 1));
        mail.files.push(MailFile {
            name,
            mime,
            bytes: part.contents().to_vec(),
        });
    }
    Some(mail)
}

/// The plain text body; an HTML-only message's HTML as text.
fn body(msg: &mail_parser::Message<'_>) -> String {
    let text = if msg.text_body_count() > 0 {
        msg.body_text(0)
    } else {
        msg.body_html(0).map(|h| html_to_text(&h).into())
    };
    text.map(|t| t.replace("\r\n", "\n"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// HTML → text: mail-parser's conversion (tags dropped, entities decoded, blocks as lines).
fn html_to_text(html: &str) -> String {
    mail_parser::decoders::html::html_to_text(html)
}

fn bare_id(id: &str) -> String {
    id.trim()
        .trim_start_matches('<')
        .trim_end_matches('>')
        .trim()
        .to_string()
}

/// Message ids of an In-Reply-To or References header.
fn ids(v: &HeaderValue<'_>) -> Vec<String> {
    match v {
        HeaderValue::Text(t) => t.split_whitespace().map(bare_id).collect(),
        HeaderValue::TextList(l) => l.iter().map(|t| bare_id(t)).collect(),
        _ => Vec::new(),
    }
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect()
}

fn unfold(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Why a message was written by a machine (RFC 3834 Auto-Submitted, bulk precedence, common
/// auto-responder headers, bounces by sender or report type); `None` for a person's mail.
fn automatic(
    headers: &[(String, String)],
    from: Option<&str>,
    ctype: Option<&str>,
) -> Option<&'static str> {
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.to_ascii_lowercase())
    };
    if get("auto-submitted").is_some_and(|v| !v.starts_with("no")) {
        return Some("auto-submitted");
    }
    if get("precedence").is_some_and(|v| {
        ["bulk", "junk", "list", "auto_reply"]
            .iter()
            .any(|p| v.starts_with(p))
    }) {
        return Some("bulk precedence");
    }
    if ["x-autoreply", "x-autorespond", "x-auto-response-suppress"]
        .iter()
        .any(|h| get(h).is_some_and(|v| h != &"x-auto-response-suppress" || v.contains("all")))
    {
        return Some("auto-responder header");
    }
    if get("return-path").is_some_and(|v| v.trim() == "<>") {
        return Some("bounce (null return path)");
    }
    let local = from.and_then(|f| f.split('@').next()).unwrap_or("");
    if [
        "mailer-daemon",
        "postmaster",
        "noreply",
        "no-reply",
        "do-not-reply",
    ]
    .contains(&local)
    {
        return Some("bounce or no-reply sender");
    }
    if ctype == Some("multipart/report") {
        return Some("delivery report");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_reply_reads_with_its_thread() {
        let raw = b"From: Alice Example <Alice@Example.org>\r\nTo: herald@example.org\r\n\
Subject: Re: plans\r\nMessage-ID: <b:2@example.org>\r\nIn-Reply-To: <a1@example.org>\r\n\
References: <root@example.org> <a1@example.org>\r\nDate: Mon, 7 Dec 2026 10:00:00 +0000\r\n\r\nSounds good.\r\n";
        let m = parse(raw).unwrap();
        assert_eq!(m.message_id.as_deref(), Some("b:2@example.org"));
        assert_eq!(m.from.as_deref(), Some("alice@example.org"));
        assert_eq!(m.from_name.as_deref(), Some("Alice Example"));
        assert_eq!(m.subject, "Re: plans");
        assert_eq!(m.in_reply_to.as_deref(), Some("a1@example.org"));
        assert_eq!(m.references, ["root@example.org", "a1@example.org"]);
        assert_eq!(m.thread_root(), Some("root@example.org"));
        assert_eq!(m.body, "Sounds good.");
        assert_eq!(m.automatic, None);
        assert_eq!(m.date.unwrap().to_rfc3339(), "2026-12-07T10:00:00+00:00");
    }

    #[test]
    fn html_only_quoted_printable_and_a_charset_become_text() {
        let raw = "From: bob@example.org\r\nSubject: =?ISO-8859-1?Q?Gr=FC=DFe?=\r\n\
Message-ID: <h@example.org>\r\nMIME-Version: 1.0\r\n\
Content-Type: text/html; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n\
<html><body><p>Caf=E9 at <b>noon</b>?</p><p>Tom &amp; Jerry</p></body></html>\r\n";
        let m = parse(raw.as_bytes()).unwrap();
        assert_eq!(m.subject, "Grüße");
        assert!(m.body.contains("Café at noon?"), "{:?}", m.body);
        assert!(m.body.contains("Tom & Jerry"), "{:?}", m.body);
        assert!(!m.body.contains('<'), "{:?}", m.body);
    }

    #[test]
    fn a_base64_attachment_is_a_file() {
        let raw = "From: a@example.org\r\nMessage-ID: <f@example.org>\r\nMIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"XX\"\r\n\r\n--XX\r\nContent-Type: text/plain\r\n\r\n\
see attached\r\n--XX\r\nContent-Type: application/pdf; name=\"r.pdf\"\r\n\
Content-Disposition: attachment; filename=\"r.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n\
JVBERi0xLjQK\r\n--XX--\r\n";
        let m = parse(raw.as_bytes()).unwrap();
        assert_eq!(m.body, "see attached");
        assert_eq!(m.files.len(), 1);
        assert_eq!(m.files[0].name, "r.pdf");
        assert_eq!(m.files[0].mime, "application/pdf");
        assert_eq!(m.files[0].bytes, b"%PDF-1.4\n");
    }

    #[test]
    fn machines_are_recognised() {
        let base = "From: alice@example.org\r\nMessage-ID: <m@x>\r\n";
        for (extra, want) in [
            ("Auto-Submitted: auto-replied\r\n", Some("auto-submitted")),
            ("Auto-Submitted: no\r\n", None),
            ("Precedence: bulk\r\n", Some("bulk precedence")),
            ("X-Autoreply: yes\r\n", Some("auto-responder header")),
            ("Return-Path: <>\r\n", Some("bounce (null return path)")),
            ("", None),
        ] {
            let raw = format!("{base}{extra}Subject: x\r\n\r\nbody\r\n");
            assert_eq!(parse(raw.as_bytes()).unwrap().automatic, want, "{extra}");
        }
        let bounce = "From: MAILER-DAEMON@example.org\r\nSubject: failure\r\n\r\nx\r\n";
        assert!(parse(bounce.as_bytes()).unwrap().automatic.is_some());
    }
}
