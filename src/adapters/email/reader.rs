//! The IMAP side: log in, select the mailbox, read every message not read yet, then wait with
//! IDLE (a poll every `poll_secs` where the server has none), and again after any drop
//! (reconnect and re-select, with backoff).
//!
//! Each message is read once: the last UID handled is stored per mailbox with its UIDVALIDITY
//! (`kv` `email:<address>:<mailbox>`, written after the message is handled), the inbox dedupes
//! on Message-ID, and a message is marked handled (\Seen, or moved to `processed_folder`) only
//! after the inbox write. A crash between the write and the mark reads it again, and the
//! inbox takes it as the duplicate it is. When UIDVALIDITY changed (or on the first start),
//! the mailbox is read by state instead: unseen mail (or all mail, when handled mail is moved
//! away).
//!
//! Must not: log a message's text, or mark a message before its inbox write.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;

use super::config::EmailConfig;
use super::imap::{self, Session};
use super::inbound::{self, Decision, Rules};
use super::outbound::{EmailOutbound, ThreadNote};
use super::parse::{self, Mail};
use super::{MailError, EMAIL};
use crate::adapters::Edge;
use crate::domain::{Attachment, MediaKind, MediaSource};
use crate::lanes::WordReply;
use crate::media::cache::MediaCache;
use crate::store::{InboxInsert, StoreError};
use crate::tasks::Backoff;

pub struct Reader {
    pub cfg: EmailConfig,
    pub edge: Edge,
    pub outbound: Arc<EmailOutbound>,
}

/// Why a session ended.
enum End {
    Stopped,
    Dropped(MailError),
}

impl Reader {
    pub async fn run(self, cancel: CancellationToken) {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            match self.session(&cancel).await {
                End::Stopped => return,
                End::Dropped(MailError::Refused(e)) => {
                    tracing::error!(error = %e, "email: the IMAP server refused the login; retrying")
                }
                End::Dropped(e) => {
                    tracing::warn!(error = %e, "email: IMAP connection lost; reconnecting")
                }
            }
            if backoff.wait(&cancel).await.is_err() {
                return;
            }
        }
    }

    /// One connection: read, wait, read, … until it drops or the daemon stops.
    async fn session(&self, cancel: &CancellationToken) -> End {
        let connected = tokio::select! {
            s = imap::connect(&self.cfg) => s,
            () = cancel.cancelled() => return End::Stopped,
        };
        let mut s = match connected {
            Ok(s) => s,
            Err(e) => return End::Dropped(e),
        };
        let caps = match s.capabilities().await {
            Ok(c) => c,
            Err(e) => return End::Dropped(imap_err("CAPABILITY", e)),
        };
        let (idle, moves) = (caps.has_str("IDLE"), caps.has_str("MOVE"));
        drop(caps);
        tracing::info!(idle, mailbox = %self.cfg.mailbox, "email: reading the mailbox");
        let poll = Duration::from_secs(self.cfg.poll_secs);
        loop {
            let read = tokio::select! {
                r = self.read_new(&mut s, moves) => r,
                () = cancel.cancelled() => return End::Stopped,
            };
            if let Err(e) = read {
                return End::Dropped(e);
            }
            if !idle {
                if crate::tasks::sleep_or_cancel(poll, cancel).await.is_err() {
                    return End::Stopped;
                }
                continue;
            }
            let mut handle = s.idle();
            if let Err(e) = handle.init().await {
                return End::Dropped(imap_err("IDLE", e));
            }
            let (waited, _stop) = handle.wait_with_timeout(poll);
            let woke = tokio::select! {
                r = waited => r,
                () = cancel.cancelled() => return End::Stopped,
            };
            if let Err(e) = woke {
                return End::Dropped(imap_err("IDLE", e));
            }
            s = match handle.done().await {
                Ok(s) => s,
                Err(e) => return End::Dropped(imap_err("DONE", e)),
            };
        }
    }

    /// Selects the mailbox and handles every message not handled yet, in UID order.
    async fn read_new(&self, s: &mut Session, moves: bool) -> Result<(), MailError> {
        let mb = s
            .select(&self.cfg.mailbox)
            .await
            .map_err(|e| imap_err("SELECT", e))?;
        let validity = mb.uid_validity.unwrap_or(0);
        let key = format!("email:{}:{}", self.cfg.me(), self.cfg.mailbox);
        let last = self.last_uid(&key, validity).await?;
        let query = match last {
            Some(last) => format!("UID {}:*", last + 1),
            None if self.cfg.processed_folder.is_some() => "ALL".to_string(),
            None => "UNSEEN".to_string(),
        };
        let mut uids: Vec<u32> = s
            .uid_search(&query)
            .await
            .map_err(|e| imap_err("SEARCH", e))?
            .into_iter()
            .filter(|u| last.is_none_or(|l| *u > l))
            .collect();
        uids.sort_unstable();
        let max = self.max_message_bytes();
        let sizes = imap::sizes(s, &uids).await?;
        for uid in uids {
            let size = sizes.iter().find(|(u, _)| *u == uid).map_or(0, |(_, n)| *n);
            let mail = if u64::from(size) > max {
                tracing::warn!(
                    uid,
                    size,
                    "email: a message over the size limit; its headers read with a note"
                );
                imap::fetch_header(s, uid)
                    .await?
                    .and_then(|h| parse::parse(&h))
                    .map(|m| oversize(m, size, max))
            } else {
                match imap::fetch(s, uid).await? {
                    Some(raw) => parse::parse(&raw),
                    None => continue, // expunged meanwhile
                }
            };
            let fallback = format!("imap.{validity}.{uid}@{}", self.cfg.mailbox);
            self.handle(mail, &fallback, uid)
                .await
                .map_err(|e| MailError::Failed(format!("the store refused a mail: {e}")))?;
            self.mark(s, uid, moves).await?;
            self.save_uid(&key, validity, uid).await?;
        }
        Ok(())
    }

    /// One message: ignored, an approval answer, or ingested. `Err` only when the store could
    /// not take it (then it is not marked, and read again).
    async fn handle(&self, mail: Option<Mail>, fallback: &str, uid: u32) -> Result<(), StoreError> {
        let Some(mut mail) = mail else {
            tracing::warn!(uid, "email: a message that does not parse; skipped");
            count("unreadable");
            return Ok(());
        };
        let me = self.cfg.me();
        let domain = self.cfg.domain();
        let rules = Rules {
            me: &me,
            domain: &domain,
            require_auth: self.cfg.require_auth,
        };
        let mut ev = match inbound::decide(&mail, &rules, fallback, Utc::now()) {
            Decision::Ignore(reason) => {
                tracing::info!(uid, reason, "email: a message not for the agent; ignored");
                count("ignored");
                return Ok(());
            }
            Decision::Ingest(ev) => ev,
        };
        let note = ThreadNote::of(&mail, &ev.platform_message_id);
        let reply = WordReply {
            platform: EMAIL,
            chat_id: &ev.chat_id,
            thread_id: ev.thread_id.as_deref(),
            sender_id: &ev.sender_id,
            text: &ev.text,
            in_reply_to: ev.reply_to.as_deref(),
        };
        if let Some(outcome) = self.edge.approvals.answer_in_words(&reply).await {
            self.outbound.tell(&ev, &note, &outcome.text()).await;
            count("answer");
            return Ok(());
        }
        let (files, notes) = self.keep_files(std::mem::take(&mut mail.files)).await;
        ev.attachments = files;
        for n in notes {
            ev.text = format!("{}\n\n{n}", ev.text).trim().to_string();
        }
        self.outbound.remember(&note).await;
        count(match self.edge.ingest.ingest(&ev).await? {
            InboxInsert::Inserted(_) => "ingested",
            InboxInsert::Duplicate(_) => "duplicate",
        });
        Ok(())
    }

    /// The files of a message in the media cache, each as an attachment; a file over
    /// `media.max_bytes` (or that the cache cannot hold) becomes a line saying so.
    async fn keep_files(&self, files: Vec<parse::MailFile>) -> (Vec<Attachment>, Vec<String>) {
        let c = &self.edge.config;
        let cache = MediaCache::under(&c.server.data_dir, c.media.cache_hours);
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        for f in files {
            let size = f.bytes.len() as u64;
            if size > c.media.max_bytes {
                notes.push(format!(
                    "[attachment {} ({size} bytes) is over the limit of {} bytes and was not read]",
                    f.name, c.media.max_bytes
                ));
                continue;
            }
            match cache.put(&f.bytes).await {
                Ok(sha) => {
                    let mut a = Attachment::new(
                        MediaKind::from_mime(&f.mime),
                        MediaSource::Cached(sha.clone()),
                    );
                    a.mime = Some(f.mime);
                    a.size = Some(size);
                    a.name = Some(f.name);
                    a.sha256 = Some(sha);
                    out.push(a);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "email: cannot keep an attachment");
                    notes.push(format!("[attachment {} could not be kept]", f.name));
                }
            }
        }
        (out, notes)
    }

    /// \Seen, or a move to `processed_folder`.
    async fn mark(&self, s: &mut Session, uid: u32, moves: bool) -> Result<(), MailError> {
        let set = uid.to_string();
        match self.cfg.processed_folder.as_deref() {
            None => {
                let updates = s
                    .uid_store(&set, "+FLAGS.SILENT (\\Seen)")
                    .await
                    .map_err(|e| imap_err("STORE", e))?;
                drain(updates).await
            }
            Some(folder) if moves => s
                .uid_mv(&set, folder)
                .await
                .map_err(|e| imap_err("MOVE", e)),
            Some(folder) => {
                s.uid_copy(&set, folder)
                    .await
                    .map_err(|e| imap_err("COPY", e))?;
                let updates = s
                    .uid_store(&set, "+FLAGS.SILENT (\\Deleted)")
                    .await
                    .map_err(|e| imap_err("STORE", e))?;
                drain(updates).await?;
                let gone = s.expunge().await.map_err(|e| imap_err("EXPUNGE", e))?;
                drain(gone).await
            }
        }
    }

    async fn last_uid(&self, key: &str, validity: u32) -> Result<Option<u32>, MailError> {
        let stored = self
            .edge
            .store
            .kv_get(key)
            .await
            .map_err(|e| MailError::Failed(e.to_string()))?;
        Ok(stored.and_then(|v| {
            let (v, uid) = v.split_once(' ')?;
            (v.parse::<u32>().ok()? == validity).then(|| uid.parse().ok())?
        }))
    }

    async fn save_uid(&self, key: &str, validity: u32, uid: u32) -> Result<(), MailError> {
        self.edge
            .store
            .kv_set(key, &format!("{validity} {uid}"))
            .await
            .map_err(|e| MailError::Failed(e.to_string()))
    }

    /// The largest message read whole: room for `media.max_bytes` of attachments (base64
    /// grows them by a third) and the text around them.
    fn max_message_bytes(&self) -> u64 {
        self.edge
            .config
            .media
            .max_bytes
            .saturating_mul(2)
            .saturating_add(1 << 20)
    }
}

/// Reads a command's untagged answers to the end.
async fn drain<S, T>(stream: S) -> Result<(), MailError>
where
    S: futures::Stream<Item = Result<T, async_imap::error::Error>>,
{
    use futures::TryStreamExt;
    futures::pin_mut!(stream);
    while stream
        .try_next()
        .await
        .map_err(|e| imap_err("read", e))?
        .is_some()
    {}
    Ok(())
}

/// A message too large to read whole: its headers, and a line saying so for its body.
fn oversize(mut head: Mail, size: u32, max: u64) -> Mail {
    head.body = format!(
        "[this mail of {size} bytes is over the limit of {max} bytes and was not read; \
         please send it in smaller pieces]"
    );
    head.files.clear();
    head
}

/// One message's outcome, counted.
fn count(outcome: &'static str) {
    metrics::counter!("herald_email_messages_total", "outcome" => outcome).increment(1);
}

fn imap_err(what: &str, e: async_imap::error::Error) -> MailError {
    MailError::Failed(format!("IMAP {what}: {e}"))
}
