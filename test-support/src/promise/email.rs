//! The email way in for the promise runs: lane `i` is the mail thread of person
//! `lane<iiii>@load.test` whose root is `lane<iiii>-root@load.test`; each message is one mail
//! replying into that thread, APPENDed once to Herald's INBOX on a real Dovecot, and its answer
//! is the mail the test's SMTP server accepted with that message as In-Reply-To: what the
//! person's mailbox would hold, independent of the store the census reads.
//!
//! Herald derives each mail's Message-ID from its outbox row and looks in the Sent folder
//! before resending a row that was in flight at a kill; the SMTP server keeps a Sent copy of
//! everything it accepts before it answers. So no mail may arrive twice: [`EmailReceipts`]
//! counts a second acceptance of one Message-ID as a resend, and the promise allows none.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use super::super::fake_email::{Letter, MailServers, Sent};
use super::attempt::{await_reply, daemon_env, Pushed};
use super::census::Kill;
use super::crash::{PeopleSaw, Side};
use super::load::{Answer, Channel};

/// The person of lane `index`.
pub fn lane_person(index: usize) -> String {
    format!("lane{index:04}@load.test")
}

fn lane_root(index: usize) -> String {
    format!("lane{index:04}-root@load.test")
}

#[derive(Clone)]
pub struct EmailChannel {
    mail: Arc<MailServers>,
    /// client id → the Message-ID of the mail delivered for it.
    pushed: Pushed<String>,
}

impl EmailChannel {
    pub async fn start() -> EmailChannel {
        EmailChannel {
            mail: Arc::new(MailServers::start().await),
            pushed: Pushed::default(),
        }
    }

    pub fn servers(&self) -> &MailServers {
        &self.mail
    }

    /// The mail for `client_id`, delivered unless it already was; returns its Message-ID.
    async fn push_once(&self, lane: &str, client_id: &str, text: &str) -> Result<String, String> {
        let index = (0..1_000)
            .find(|i| self.lane("", *i) == lane)
            .ok_or_else(|| format!("not a lane of this channel: {lane}"))?;
        let id = format!("{client_id}@load.test");
        let fresh = self
            .pushed
            .lock()
            .insert(client_id.to_string(), id.clone())
            .is_none();
        if fresh {
            let l = Letter::new(&lane_person(index), "Load", text, &id)
                .replying_to(&lane_root(index), &[]);
            self.mail.deliver(&l).await;
        }
        Ok(id)
    }

    pub fn receipts(&self, kills: &[Kill]) -> EmailReceipts {
        let sent = self.mail.sent();
        let pushed = self.pushed.all();
        let mut r = EmailReceipts {
            messages: pushed.len(),
            mails: sent.len(),
            ..EmailReceipts::default()
        };
        let mut first_at: HashMap<String, i64> = HashMap::new();
        let mut replies: HashMap<String, usize> = HashMap::new();
        let ms = |s: &Sent| s.at_ms;
        for s in &sent {
            match first_at.get(&s.message_id) {
                None => {
                    first_at.insert(s.message_id.clone(), ms(s));
                }
                Some(&first) => {
                    r.resends += 1;
                    let at = ms(s);
                    if kills.iter().any(|k| first <= k.at_ms && at >= k.at_ms) {
                        r.resends_across_a_kill += 1;
                    }
                    if r.details.len() < 20 {
                        r.details.push(format!("{} accepted again", s.message_id));
                    }
                }
            }
            match s.in_reply_to.as_ref().filter(|p| pushed.contains(p)) {
                Some(p) => *replies.entry(p.clone()).or_default() += 1,
                None => r.mails_not_replies += 1,
            }
        }
        for id in &pushed {
            match replies.get(id).copied().unwrap_or(0) {
                0 => r.unanswered += 1,
                1 => r.answered_exactly_once += 1,
                _ => r.answered_more_than_once += 1,
            }
        }
        r
    }
}

impl Channel for EmailChannel {
    fn platform(&self) -> &'static str {
        "email"
    }

    fn lane(&self, _prefix: &str, index: usize) -> String {
        let raw = format!("email:{}:{}", lane_person(index), lane_root(index));
        herald::domain::LaneKey::new(&raw).as_str().to_string()
    }

    fn platform_id(&self, client_id: &str) -> String {
        self.pushed.platform_id(client_id, String::clone)
    }

    fn deliver(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> impl Future<Output = Result<Answer, String>> + Send {
        let this = self.clone();
        let (lane, client_id, text) = (lane.to_string(), client_id.to_string(), text.to_string());
        async move {
            let id = this.push_once(&lane, &client_id, &text).await?;
            let mail = this.mail.clone();
            await_reply(&id, || {
                mail.sent()
                    .into_iter()
                    .find(|s| s.in_reply_to.as_deref() == Some(id.as_str()))
                    .map(|s| s.text)
            })
            .await
        }
    }
}

impl Side for EmailChannel {
    type Receipts = EmailReceipts;

    fn daemon_env(&self) -> Vec<(String, String)> {
        let mut env = daemon_env(Vec::new());
        env.extend(self.mail.env("[\"@load.test\"]"));
        env
    }

    fn receipts(&self, kills: &[Kill]) -> Option<EmailReceipts> {
        Some(EmailChannel::receipts(self, kills))
    }

    fn report(&self) -> Value {
        serde_json::json!({"sent_folder_copies": self.mail.smtp.accepted().len()})
    }
}

/// What the people's mailboxes received.
#[derive(Debug, Default, Serialize)]
pub struct EmailReceipts {
    /// Mails delivered to Herald (one per client message).
    pub messages: usize,
    /// Mails the SMTP server accepted from Herald.
    pub mails: usize,
    pub answered_exactly_once: usize,
    pub unanswered: usize,
    pub answered_more_than_once: usize,
    /// Mails whose Message-ID was accepted before: one outbox row mailed twice.
    pub resends: usize,
    pub resends_across_a_kill: usize,
    /// Mails answering no delivered message.
    pub mails_not_replies: usize,
    pub details: Vec<String>,
}

impl EmailReceipts {
    /// Every message answered exactly once, no row mailed twice.
    pub fn promise_held(&self) -> bool {
        self.unanswered == 0
            && self.answered_more_than_once == 0
            && self.resends == 0
            && self.answered_exactly_once == self.messages
    }
}

impl PeopleSaw for EmailReceipts {
    fn promise_held(&self) -> bool {
        EmailReceipts::promise_held(self)
    }
    fn messages(&self) -> usize {
        self.messages
    }
    fn unanswered(&self) -> usize {
        self.unanswered
    }
    fn resends_across_a_kill(&self) -> usize {
        self.resends_across_a_kill
    }
}
