//! Email's conformance rig: the adapter (async-imap reading a real Dovecot, lettre submitting
//! to the test's SMTP server) with the owner and a second person on `allowed_senders`. The
//! owner's conversation is one mail thread: every mail the owner sends replies into the thread
//! whose root is `conf-owner@example.org`, so all of them land in one lane; the stranger writes
//! a new mail of their own. A person sees the mails Herald sent to their address, in the order
//! the SMTP server accepted them: each one's text part, and each attached file.
//!
//! Email has no buttons: an approval question is a mail like any other (so it is seen), and
//! the answer is a `yes` / `no` reply from the requester (`press`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use herald::adapters::split::Measure;
use herald::config::Config;
use herald::lanes::ASK_IN_WORDS;
use herald_test_support::fake_email::{Letter, MailServers};
use herald_test_support::harness::{init, test_config, wait_for};
use herald_test_support::promise::email::EmailChannel;

use super::rig_support::{Core, WAIT};
use super::{Caps, Rig, Seen, Who};

const OWNER: &str = "owner@example.org";
const OTHER: &str = "other@example.org";
const STRANGER: &str = "stranger@elsewhere.test";
/// The owner's thread.
const ROOT: &str = "conf-owner@example.org";

pub struct EmailRig {
    mail: MailServers,
    core: Core,
    next: AtomicUsize,
}

fn address(who: Who) -> &'static str {
    who.pick(OWNER, OTHER, STRANGER)
}

impl EmailRig {
    fn id(&self) -> String {
        format!(
            "conf-{}@example.org",
            self.next.fetch_add(1, Ordering::SeqCst)
        )
    }

    /// A mail from `who`: a reply in the owner's thread, or the stranger's own new mail.
    fn letter(&self, who: Who, text: &str) -> Letter {
        let l = Letter::new(address(who), "Conformance", text, &self.id());
        match who {
            Who::Stranger => l,
            _ => l.replying_to(ROOT, &[]),
        }
    }

    /// The last approval question mailed to the owner: its Message-ID and text.
    fn last_question(&self) -> Option<(String, String)> {
        self.mail
            .sent()
            .into_iter()
            .rfind(|s| s.to.iter().any(|t| t == OWNER) && s.text.contains(ASK_IN_WORDS))
            .map(|s| (s.message_id, s.text))
    }
}

impl Rig for EmailRig {
    type Crash = EmailChannel;
    const LANE: &'static str =
        "email:owner_example.org:conf-owner_example.org-9a57c944933641872749";

    fn caps() -> Caps {
        Caps::platform(herald::adapters::email::SPEC.caps, Measure::Chars)
    }

    async fn crash_side() -> EmailChannel {
        EmailChannel::start().await
    }

    async fn start(tune: impl FnOnce(&mut Config)) -> EmailRig {
        init();
        let mail = MailServers::start().await;
        let mut section =
            herald::config::from_toml(&mail.toml(&[OWNER, OTHER])).expect("an [email] section");
        let config = |llm: &_, data: &_| {
            let mut c = test_config(llm, data);
            let table = section.sections.remove("email").expect("the email table");
            c.sections.insert("email".into(), table);
            c
        };
        let core = Core::start(config, tune).await;
        EmailRig {
            mail,
            core,
            next: AtomicUsize::new(1),
        }
    }

    fn core(&self) -> &Core {
        &self.core
    }

    async fn say(&self, who: Who, text: &str) {
        self.mail.deliver(&self.letter(who, text)).await;
    }

    async fn photo(&self, bytes: &[u8], caption: &str) {
        let l = self
            .letter(Who::Owner, caption)
            .file("photo.png", "image/png", bytes);
        self.mail.deliver(&l).await;
    }

    async fn document(&self, name: &str, mime: &str, bytes: &[u8]) {
        let l = self.letter(Who::Owner, "").file(name, mime, bytes);
        self.mail.deliver(&l).await;
    }

    async fn question(&self) -> String {
        wait_for("an approval question", WAIT, async || {
            self.last_question().map(|(_, text)| text)
        })
        .await
    }

    /// A `yes` or `no` reply to the question, from `who`; returns what Herald answered them.
    async fn press(&self, who: Who, approve: bool) -> String {
        let (question, _) = self.last_question().expect("a question to answer");
        let before = self.mail.sent().len();
        let answer = if approve { "yes" } else { "no" };
        let l = Letter::new(address(who), "Re: Conformance", answer, &self.id())
            .replying_to(&question, &[ROOT.to_string()]);
        self.mail.deliver(&l).await;
        wait_for("the answer to be answered", WAIT, async || {
            self.mail
                .sent()
                .into_iter()
                .skip(before)
                .find(|s| s.to.iter().any(|t| t == address(who)))
                .map(|s| s.text)
        })
        .await
    }

    async fn seen(&self, who: Who) -> Vec<Seen> {
        let mut seen = Vec::new();
        for s in self.mail.sent() {
            if !s.to.iter().any(|t| t == address(who)) {
                continue;
            }
            if !s.text.is_empty() {
                seen.push(Seen::Text(s.text.clone()));
            }
            for (name, bytes) in s.files {
                seen.push(Seen::File { name, bytes });
            }
        }
        seen
    }

    fn edits(&self) -> usize {
        0
    }

    fn refuse_next_send(&self, secs: u64) {
        self.mail.smtp.refuse_next(1, secs);
    }

    fn send_times(&self) -> Vec<Instant> {
        self.mail
            .smtp
            .accepted()
            .into_iter()
            .map(|a| a.at)
            .collect()
    }

    async fn stop(self) {
        self.core.stop().await;
    }
}
