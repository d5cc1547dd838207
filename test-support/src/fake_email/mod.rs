//! Real mail servers for the email adapter's tests: Dovecot (IMAP, `dovecot.rs`) holding
//! Herald's mailbox, filled by the test through IMAP APPEND as a mail delivery would, and a
//! small SMTP server (`smtp.rs`) receiving what Herald sends, keeping each accepted message
//! and its copy in Herald's Sent folder on the Dovecot (as Gmail and Fastmail keep one).
//!
//! Nothing here is a fake of the protocols: both servers speak them to Herald's real clients
//! (async-imap and lettre). [`Letter`] writes the mails people send (MIME, base64 files, the
//! receiving server's Authentication-Results on top), [`Sent`] reads what Herald sent.

pub mod dovecot;
pub mod mailbox;
pub mod smtp;

use std::time::{Duration, Instant};

use base64::Engine as _;

pub use dovecot::Dovecot;
pub use smtp::{Accepted, SentCopy, SmtpSink};

/// Herald's own mailbox.
pub const ADDRESS: &str = "herald@herald.test";
pub const PASSWORD: &str = "app-password-1";

pub struct MailServers {
    pub dovecot: Dovecot,
    pub smtp: SmtpSink,
}

impl MailServers {
    pub async fn start() -> MailServers {
        MailServers::start_with("").await
    }

    /// As [`MailServers::start`], with `dovecot_conf` lines added to Dovecot's config.
    pub async fn start_with(dovecot_conf: &str) -> MailServers {
        let dovecot = Dovecot::start_with(&[(ADDRESS, PASSWORD)], dovecot_conf);
        let smtp = SmtpSink::start(
            (ADDRESS, PASSWORD),
            Some(SentCopy {
                port: dovecot.port,
                login: ADDRESS.into(),
                password: PASSWORD.into(),
                folder: "Sent".into(),
            }),
        )
        .await;
        MailServers { dovecot, smtp }
    }

    /// The `[email]` section for a Herald on these servers answering `allowed`.
    pub fn toml(&self, allowed: &[&str]) -> String {
        let list: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
        format!(
            "[email]\naddress = \"{ADDRESS}\"\nimap_host = \"127.0.0.1\"\nimap_port = {}\n\
             smtp_host = \"127.0.0.1\"\nsmtp_port = {}\npassword = \"{PASSWORD}\"\n\
             insecure = true\npoll_secs = 5\nallowed_senders = [{}]\n",
            self.dovecot.port,
            self.smtp.port,
            list.join(", ")
        )
    }

    /// The same settings as `HERALD_EMAIL__…` variables (for the `herald` binary).
    pub fn env(&self, allowed: &str) -> Vec<(String, String)> {
        [
            ("HERALD_EMAIL__ADDRESS", ADDRESS.to_string()),
            ("HERALD_EMAIL__IMAP_HOST", "127.0.0.1".into()),
            ("HERALD_EMAIL__IMAP_PORT", self.dovecot.port.to_string()),
            ("HERALD_EMAIL__SMTP_HOST", "127.0.0.1".into()),
            ("HERALD_EMAIL__SMTP_PORT", self.smtp.port.to_string()),
            ("HERALD_EMAIL__PASSWORD", PASSWORD.into()),
            ("HERALD_EMAIL__INSECURE", "true".into()),
            ("HERALD_EMAIL__POLL_SECS", "5".into()),
            ("HERALD_EMAIL__ALLOWED_SENDERS", allowed.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Delivers `letter` into Herald's INBOX (IMAP APPEND).
    pub async fn deliver(&self, letter: &Letter) {
        self.append("INBOX", &letter.raw()).await;
    }

    pub async fn append(&self, folder: &str, raw: &[u8]) {
        mailbox::append(self.dovecot.port, ADDRESS, PASSWORD, folder, raw)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "APPEND to {folder}: {e}; dovecot log:\n{}",
                    self.dovecot.log()
                )
            });
    }

    /// The messages of one of Herald's folders, with their flags.
    pub async fn folder(&self, folder: &str) -> Vec<(Vec<u8>, Vec<String>)> {
        mailbox::read(self.dovecot.port, ADDRESS, PASSWORD, folder)
            .await
            .unwrap_or_else(|e| panic!("reading {folder}: {e}"))
    }

    /// What Herald sent, in the order the SMTP server accepted it.
    pub fn sent(&self) -> Vec<Sent> {
        self.smtp.accepted().iter().map(Sent::read).collect()
    }

    /// Waits until Herald sent at least `n` messages; returns them all.
    pub async fn wait_sent(&self, n: usize, within: Duration) -> Vec<Sent> {
        crate::harness::wait_for(&format!("{n} mails sent"), within, async || {
            let sent = self.sent();
            (sent.len() >= n).then_some(sent)
        })
        .await
    }
}

/// A mail someone sends Herald.
#[derive(Clone, Debug)]
pub struct Letter {
    pub from: String,
    pub from_name: Option<String>,
    pub subject: String,
    pub message_id: String,
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
    pub text: Option<String>,
    pub html: Option<String>,
    /// The receiving server's verdict; `None` leaves the header out.
    pub auth: Option<String>,
    pub headers: Vec<(String, String)>,
    pub files: Vec<(String, String, Vec<u8>)>,
}

impl Letter {
    /// A plain mail from `from`, passing DKIM for its domain at the receiving server.
    pub fn new(from: &str, subject: &str, text: &str, message_id: &str) -> Letter {
        let domain = from.rsplit('@').next().unwrap_or("");
        Letter {
            from: from.into(),
            from_name: None,
            subject: subject.into(),
            message_id: message_id.into(),
            in_reply_to: None,
            references: Vec::new(),
            text: Some(text.into()),
            html: None,
            auth: Some(format!(
                "mx.herald.test; dkim=pass header.d={domain} header.s=s1; spf=pass smtp.mailfrom={from}"
            )),
            headers: Vec::new(),
            files: Vec::new(),
        }
    }

    /// This letter as a reply to `parent` (its References, then it).
    pub fn replying_to(mut self, parent: &str, earlier: &[String]) -> Letter {
        let mut refs = earlier.to_vec();
        refs.push(parent.to_string());
        self.in_reply_to = Some(parent.to_string());
        self.references = refs;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Letter {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn file(mut self, name: &str, mime: &str, bytes: &[u8]) -> Letter {
        self.files.push((name.into(), mime.into(), bytes.to_vec()));
        self
    }

    /// The message as a mail server would store it.
    pub fn raw(&self) -> Vec<u8> {
        let mut h = String::new();
        if let Some(a) = &self.auth {
            h.push_str(&format!("Authentication-Results: {a}\r\n"));
        }
        let from = match &self.from_name {
            Some(n) => format!("\"{n}\" <{}>", self.from),
            None => self.from.clone(),
        };
        h.push_str(&format!(
            "From: {from}\r\nTo: {ADDRESS}\r\nSubject: {}\r\n",
            self.subject
        ));
        h.push_str(&format!(
            "Message-ID: <{}>\r\nDate: Mon, 7 Dec 2026 10:00:00 +0000\r\n",
            self.message_id
        ));
        if let Some(p) = &self.in_reply_to {
            h.push_str(&format!("In-Reply-To: <{p}>\r\n"));
        }
        if !self.references.is_empty() {
            let refs: Vec<String> = self.references.iter().map(|r| format!("<{r}>")).collect();
            h.push_str(&format!("References: {}\r\n", refs.join(" ")));
        }
        for (n, v) in &self.headers {
            h.push_str(&format!("{n}: {v}\r\n"));
        }
        h += "MIME-Version: 1.0\r\n";
        let body_part = match (&self.text, &self.html) {
            (Some(t), None) => format!(
                "Content-Type: text/plain; charset=utf-8\r\n\r\n{}\r\n",
                crlf(t)
            ),
            (None, Some(html)) => format!(
                "Content-Type: text/html; charset=utf-8\r\n\r\n{}\r\n",
                crlf(html)
            ),
            (Some(t), Some(html)) => format!(
                "Content-Type: multipart/alternative; boundary=\"ALT\"\r\n\r\n--ALT\r\n\
                 Content-Type: text/plain; charset=utf-8\r\n\r\n{}\r\n--ALT\r\n\
                 Content-Type: text/html; charset=utf-8\r\n\r\n{}\r\n--ALT--\r\n",
                crlf(t),
                crlf(html)
            ),
            (None, None) => "Content-Type: text/plain; charset=utf-8\r\n\r\n\r\n".to_string(),
        };
        if self.files.is_empty() {
            return format!("{h}{body_part}").into_bytes();
        }
        let mut out = format!(
            "{h}Content-Type: multipart/mixed; boundary=\"MIX\"\r\n\r\n--MIX\r\n{body_part}"
        );
        for (name, mime, bytes) in &self.files {
            let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
            let lines: Vec<&str> = b64
                .as_bytes()
                .chunks(76)
                .map(|c| std::str::from_utf8(c).expect("base64 is ASCII"))
                .collect();
            out.push_str(&format!(
                "--MIX\r\nContent-Type: {mime}; name=\"{name}\"\r\n\
                 Content-Disposition: attachment; filename=\"{name}\"\r\n\
                 Content-Transfer-Encoding: base64\r\n\r\n{}\r\n",
                lines.join("\r\n")
            ));
        }
        out += "--MIX--\r\n";
        out.into_bytes()
    }
}

fn crlf(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// A message Herald sent, as its recipient reads it.
#[derive(Clone, Debug)]
pub struct Sent {
    pub to: Vec<String>,
    pub from: String,
    pub subject: String,
    pub message_id: String,
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
    /// The text/plain part.
    pub text: String,
    /// The text/html part.
    pub html: Option<String>,
    pub files: Vec<(String, Vec<u8>)>,
    pub authed: bool,
    pub at: Instant,
    pub at_ms: i64,
    pub raw: Vec<u8>,
}

impl Sent {
    pub fn read(a: &Accepted) -> Sent {
        use mail_parser::{HeaderValue, MessageParser, MimeHeaders};
        let m = MessageParser::default()
            .parse(&a.data)
            .expect("Herald sent a message that parses");
        let ids = |v: &HeaderValue<'_>| -> Vec<String> {
            match v {
                HeaderValue::Text(t) => vec![t.to_string()],
                HeaderValue::TextList(l) => l.iter().map(|t| t.to_string()).collect(),
                _ => Vec::new(),
            }
        };
        Sent {
            to: a.to.clone(),
            from: a.from.clone(),
            subject: m.subject().unwrap_or("").to_string(),
            message_id: m.message_id().unwrap_or("").to_string(),
            in_reply_to: ids(m.in_reply_to()).into_iter().next(),
            references: ids(m.references()),
            text: m
                .body_text(0)
                .map(|t| t.trim().replace("\r\n", "\n"))
                .unwrap_or_default(),
            html: m.body_html(0).map(|h| h.to_string()),
            files: m
                .attachments()
                .map(|p| {
                    (
                        p.attachment_name().unwrap_or("").to_string(),
                        p.contents().to_vec(),
                    )
                })
                .collect(),
            authed: a.authed,
            at: a.at,
            at_ms: a.at_ms,
            raw: a.data.clone(),
        }
    }
}
