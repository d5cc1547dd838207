//! Sending mail: one outbox row is one message over SMTP (lettre: submission with STARTTLS or
//! implicit TLS and AUTH), threaded under the mail it answers (In-Reply-To, References, "Re:"
//! subject), Markdown as multipart/alternative (the text as written, and sanitised HTML).
//!
//! Each message's Message-ID is derived from its outbox row's key (`ids.rs`). A row that was
//! started before (its first attempt did not end cleanly: a crash, a timeout) is first looked
//! for in the Sent folder by that Message-ID, so a crash between the server's acceptance and
//! our record of it does not mail twice where the server keeps a Sent copy.
//!
//! What a reply threads under comes from the note the reader left for each mail it took in
//! (`kv` `email:msg:<Message-ID>`: its subject and References); a brief that opens a thread
//! gets its job's name as subject.
//!
//! Must not: log a message's text or an address list; send a row that the Sent folder
//! already holds.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use serde::{Deserialize, Serialize};

use super::compose::{build, smtp_error, under, Head};
use super::config::EmailConfig;
use super::ids::message_id;
use super::parse::Mail;
use super::{imap, EMAIL};
use crate::delivery::{Ask, OutFile, Outbound, SendError};
use crate::domain::{MessageEvent, Platform};
use crate::store::{OutboxRow, Store};

/// A mail Herald took in or sent, as a reply to it needs it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThreadNote {
    pub id: String,
    pub subject: String,
    pub references: Vec<String>,
}

impl ThreadNote {
    pub fn of(mail: &Mail, id: &str) -> ThreadNote {
        ThreadNote {
            id: id.to_string(),
            subject: mail.subject.clone(),
            references: mail.references.clone(),
        }
    }

    fn key(id: &str) -> String {
        format!("email:msg:{id}")
    }
}

pub struct EmailOutbound {
    cfg: EmailConfig,
    smtp: AsyncSmtpTransport<Tokio1Executor>,
    /// The store, once the adapter started (for thread notes and a brief's job name).
    pub store: Arc<OnceLock<Arc<dyn Store>>>,
}

impl EmailOutbound {
    pub fn new(cfg: EmailConfig) -> anyhow::Result<EmailOutbound> {
        let host = cfg.smtp_host();
        let builder = match (cfg.insecure, cfg.tls) {
            (true, _) => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host),
            (false, super::config::EmailTls::Implicit) => {
                AsyncSmtpTransport::<Tokio1Executor>::relay(host)?
            }
            (false, super::config::EmailTls::Starttls) => {
                AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(host)?
            }
        };
        let password = cfg
            .password()
            .map(|p| p.expose().to_string())
            .unwrap_or_default();
        let smtp = builder
            .port(cfg.smtp_port())
            .credentials(Credentials::new(cfg.login(), password))
            .timeout(Some(Duration::from_secs(30)))
            .build();
        Ok(EmailOutbound {
            cfg,
            smtp,
            store: Arc::new(OnceLock::new()),
        })
    }

    /// Tries the SMTP login (`herald doctor`).
    pub async fn check_login(&self) -> Result<(), String> {
        match self.smtp.test_connection().await {
            Ok(true) => Ok(()),
            Ok(false) => Err("the SMTP server did not answer".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Keeps what a reply to this mail needs (best effort: without it the reply is still
    /// threaded by In-Reply-To, under a plain subject).
    pub async fn remember(&self, note: &ThreadNote) {
        let Some(store) = self.store.get() else {
            return;
        };
        let json = serde_json::to_string(note).expect("a note serializes");
        if let Err(e) = store.kv_set(&ThreadNote::key(&note.id), &json).await {
            tracing::warn!(error = %e, "email: cannot keep a thread note");
        }
    }

    async fn recall(&self, id: &str) -> Option<ThreadNote> {
        let store = self.store.get()?;
        let json = store.kv_get(&ThreadNote::key(id)).await.ok()??;
        serde_json::from_str(&json).ok()
    }

    /// Answers the person who wrote `ev` directly (an approval answered in words).
    pub async fn tell(&self, ev: &MessageEvent, note: &ThreadNote, text: &str) {
        let head = under(note);
        let id = message_id(
            &format!("told:{}", ev.platform_message_id),
            &self.cfg.domain(),
            false,
        );
        let sent = self.deliver(&ev.chat_id, &id, &head, text, None).await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, "email: could not tell the person what their answer did");
        }
    }

    /// Where a row's message goes in its thread: under the mail it answers, else under its
    /// thread's root, else a new thread (a brief: its job's name as subject).
    async fn head(&self, row: &OutboxRow) -> Head {
        let parent = row.reply_to.as_deref().or(row.thread_id.as_deref());
        if let Some(parent) = parent {
            return match self.recall(parent).await {
                Some(note) => under(&note),
                None => Head {
                    subject: "Re: your message".into(),
                    in_reply_to: Some(parent.to_string()),
                    references: vec![parent.to_string()],
                },
            };
        }
        Head {
            subject: self.new_subject(row).await,
            ..Head::default()
        }
    }

    /// A new thread's subject: the job's name for a scheduled brief.
    async fn new_subject(&self, row: &OutboxRow) -> String {
        let from = match (self.store.get(), row.inbox_id) {
            (Some(store), Some(id)) => store.inbox_get(id).await.ok().flatten(),
            _ => None,
        };
        match from {
            Some(r) if r.event.platform == Platform::CRON => format!("Herald: {}", r.event.chat_id),
            _ => "A message from Herald".into(),
        }
    }

    /// Whether a mail with `id` already reached the Sent folder (a lookup that fails counts
    /// as "no": the row is sent, as it would be without the folder).
    async fn already_sent(&self, id: &str) -> bool {
        let folder = self.cfg.sent_folder.trim();
        if folder.is_empty() {
            return false;
        }
        match imap::holds(&self.cfg, folder, id).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "email: cannot look in the Sent folder; sending");
                false
            }
        }
    }

    async fn send_row(&self, row: &OutboxRow, file: Option<&OutFile>) -> Result<String, SendError> {
        let opens = row.thread_id.is_none() && row.reply_to.is_none();
        let id = message_id(&row.idem_key, &self.cfg.domain(), opens);
        if row.attempts > 0 && self.already_sent(&id).await {
            tracing::info!(
                outbox_id = row.id,
                "email: already in the Sent folder; not sent again"
            );
            return Ok(id);
        }
        let head = self.head(row).await;
        self.deliver(&row.chat_id, &id, &head, &row.text, file)
            .await?;
        let mut references = head.references.clone();
        if let Some(parent) = head.in_reply_to.clone().filter(|p| !references.contains(p)) {
            references.push(parent);
        }
        self.remember(&ThreadNote {
            id: id.clone(),
            subject: head.subject,
            references,
        })
        .await;
        Ok(id)
    }

    async fn deliver(
        &self,
        to: &str,
        id: &str,
        head: &Head,
        text: &str,
        file: Option<&OutFile>,
    ) -> Result<(), SendError> {
        let msg = build(&self.cfg.me(), to, id, head, text, file)?;
        self.smtp.send(msg).await.map(|_| ()).map_err(smtp_error)
    }
}

#[async_trait]
impl Outbound for EmailOutbound {
    fn platform(&self) -> Platform {
        EMAIL
    }

    /// Mail has no practical length limit: a reply is one message.
    fn split(&self, text: &str) -> Vec<String> {
        vec![text.to_string()]
    }

    async fn send(&self, row: &OutboxRow) -> Result<String, SendError> {
        self.send_row(row, None).await
    }

    async fn send_file(&self, row: &OutboxRow, file: &OutFile) -> Result<String, SendError> {
        self.send_row(row, Some(file)).await
    }

    /// No buttons: the question in words, threaded where it was asked; the person's "yes" or
    /// "no" reply comes back through the reader.
    async fn ask(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        let id = message_id(
            &format!("approval:{}", ask.approval_id),
            &self.cfg.domain(),
            false,
        );
        let head = match ask.thread_id {
            Some(t) => match self.recall(t).await {
                Some(note) => under(&note),
                None => Head {
                    subject: "Re: your message".into(),
                    in_reply_to: Some(t.to_string()),
                    references: vec![t.to_string()],
                },
            },
            None => Head {
                subject: "Herald asks for your approval".into(),
                ..Head::default()
            },
        };
        let text = crate::lanes::question_in_words(ask.text);
        self.deliver(ask.chat_id, &id, &head, &text, None).await?;
        Ok(id)
    }
}
