//! One outgoing mail: its place in the thread (subject, In-Reply-To, References), its MIME
//! (multipart/alternative of the text and the HTML rendered from its Markdown, files as
//! attachments), and what an SMTP failure means for the sender.

use std::time::Duration;

use lettre::message::{header::ContentType, Attachment, Mailbox, MultiPart, SinglePart};
use lettre::Message;

use super::html;
use super::outbound::ThreadNote;
use crate::delivery::{OutFile, SendError};

/// How a new message sits in its thread.
#[derive(Debug, Clone, Default)]
pub struct Head {
    pub subject: String,
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
}

/// The head of a reply to `note`.
pub fn under(note: &ThreadNote) -> Head {
    let subject = if note.subject.to_ascii_lowercase().starts_with("re:") {
        note.subject.clone()
    } else if note.subject.is_empty() {
        "Re: your message".into()
    } else {
        format!("Re: {}", note.subject)
    };
    let mut references = note.references.clone();
    if !references.contains(&note.id) {
        references.push(note.id.clone());
    }
    Head {
        subject,
        in_reply_to: Some(note.id.clone()),
        references,
    }
}

pub fn build(
    from: &str,
    to: &str,
    id: &str,
    head: &Head,
    text: &str,
    file: Option<&OutFile>,
) -> Result<Message, SendError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| SendError::Permanent(format!("{what}: {e}"));
    let from: Mailbox = from.parse().map_err(|e| bad("our address", &e))?;
    let to: Mailbox = to.parse().map_err(|e| bad("the recipient's address", &e))?;
    let mut b = Message::builder()
        .from(from)
        .to(to)
        .subject(head.subject.clone())
        .message_id(Some(format!("<{id}>")))
        .date_now();
    if let Some(parent) = &head.in_reply_to {
        b = b.in_reply_to(format!("<{parent}>"));
    }
    if !head.references.is_empty() {
        let refs: Vec<String> = head.references.iter().map(|r| format!("<{r}>")).collect();
        b = b.references(refs.join(" "));
    }
    let body = MultiPart::alternative_plain_html(text.to_string(), html::markdown_to_html(text));
    let msg = match file {
        None => b.multipart(body),
        Some(f) => {
            let ctype = ContentType::parse(&f.mime).unwrap_or_else(|_| {
                ContentType::parse("application/octet-stream").expect("a type")
            });
            let part: SinglePart = Attachment::new(f.name.clone()).body(f.data.clone(), ctype);
            b.multipart(MultiPart::mixed().multipart(body).singlepart(part))
        }
    };
    msg.map_err(|e| bad("the message", &e))
}

/// An SMTP failure as the sender reads it: a 4xx reply is a wait (the seconds the reply names,
/// else 30), a 5xx a refusal, anything else (connection, TLS, timeout) a retry.
pub fn smtp_error(e: lettre::transport::smtp::Error) -> SendError {
    if e.is_transient() {
        let wait = retry_secs(&e.to_string()).unwrap_or(30);
        return SendError::RetryAfter(Duration::from_secs(wait));
    }
    if e.is_permanent() {
        return SendError::Permanent(format!("the SMTP server refused the mail: {e}"));
    }
    SendError::Transient(format!("SMTP: {e}"))
}

/// "try again in 2 seconds" → 2.
fn retry_secs(reply: &str) -> Option<u64> {
    let words: Vec<&str> = reply.split_whitespace().collect();
    words.windows(2).find_map(|w| {
        let unit = w[1].trim_end_matches(['.', ',', ')']).to_ascii_lowercase();
        let n = w[0].parse::<u64>().ok()?;
        match unit.as_str() {
            "s" | "sec" | "secs" | "second" | "seconds" => Some(n),
            "min" | "mins" | "minute" | "minutes" => Some(n * 60),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_threads_under_its_parent() {
        let note = ThreadNote {
            id: "b@x".into(),
            subject: "Plans".into(),
            references: vec!["a@x".into()],
        };
        let h = under(&note);
        assert_eq!(h.subject, "Re: Plans");
        assert_eq!(h.in_reply_to.as_deref(), Some("b@x"));
        assert_eq!(h.references, ["a@x", "b@x"]);
        let again = under(&ThreadNote {
            subject: "RE: Plans".into(),
            ..note
        });
        assert_eq!(again.subject, "RE: Plans");
    }

    #[test]
    fn the_built_message_carries_thread_headers_and_both_parts() {
        let head = Head {
            subject: "Re: Plans".into(),
            in_reply_to: Some("b@x".into()),
            references: vec!["a@x".into(), "b@x".into()],
        };
        let msg = build(
            "herald@example.net",
            "alice@example.org",
            "herald.1.t@example.net",
            &head,
            "**Yes** <script>",
            None,
        )
        .unwrap();
        let raw = String::from_utf8(msg.formatted()).unwrap();
        for want in [
            "Message-ID: <herald.1.t@example.net>",
            "In-Reply-To: <b@x>",
            "References: <a@x> <b@x>",
            "Subject: Re: Plans",
            "multipart/alternative",
            "text/plain",
            "text/html",
        ] {
            assert!(raw.contains(want), "{want} in {raw}");
        }
        assert!(raw.contains("&lt;script&gt;"), "{raw}");
    }

    #[test]
    fn a_4xx_names_its_wait() {
        assert_eq!(
            retry_secs("451 4.7.1 rate limited, try again in 2 seconds"),
            Some(2)
        );
        assert_eq!(retry_secs("421 try later in 3 min."), Some(180));
        assert_eq!(retry_secs("451 busy"), None);
    }
}
