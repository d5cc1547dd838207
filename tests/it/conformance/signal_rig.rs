//! Signal's conformance rig: the adapter (our reqwest JSON-RPC client and event stream) against
//! the fake signal-cli daemon (`test-support/src/fake_signal`). Signal's direct chats hold two
//! people, so the owner's conversation is a group of the owner, a second allowed person and
//! the bot, where every message is answered (`free_response_groups`); the stranger writes
//! directly. A person sees the bot's messages of their chat as the fake shows them (edits
//! applied, deletions gone), without the approval questions and the answers to presses.
//!
//! Signal has no buttons: a press is a `yes`/`no` reply quoting the question (the adapter hands
//! it to `Approvals::answer_in_words`), and what the presser is told is the bot's next message.

use std::sync::Mutex;
use std::time::Instant;

use herald::adapters::split::Measure;
use herald::config::Config;
use herald::lanes::ASK_IN_WORDS;
use herald_test_support::fake_signal::{FakeSignal, File, Person};
use herald_test_support::harness::{init, test_config, wait_for};
use herald_test_support::promise::signal::SignalChannel;

use super::rig_support::{Core, WAIT};
use super::{Caps, Rig, Seen, Who};

/// signal-cli's id of the owner's group.
const GROUP: &str = "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI=";

pub struct SignalRig {
    fake: FakeSignal,
    core: Core,
    /// Timestamps of the bot's answers to presses (left out of what people see).
    answers: Mutex<Vec<u64>>,
}

fn person(who: Who) -> Person {
    match who {
        Who::Owner => Person::new("+15550100001", "Owner"),
        Who::Other => Person::new("+15550100002", "Other"),
        Who::Stranger => Person::new("+15550100009", "Stranger"),
    }
}

/// The fake's name of the chat `who` talks in.
fn chat(who: Who) -> String {
    match who {
        Who::Stranger => person(who).number,
        _ => format!("group:{GROUP}"),
    }
}

impl SignalRig {
    /// The open question's timestamp: the bot's last message asking for a yes or no.
    fn last_question(&self) -> Option<(u64, String)> {
        self.fake
            .sent_to(&chat(Who::Owner))
            .into_iter()
            .filter(|s| s.edit_of.is_none() && s.message.contains(ASK_IN_WORDS))
            .map(|s| (s.timestamp, s.message))
            .next_back()
    }
}

impl Rig for SignalRig {
    type Crash = SignalChannel;
    const LANE: &'static str = "signal:group:Pmpi-EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI";

    fn caps() -> Caps {
        Caps::platform(herald::adapters::signal::SPEC.caps, Measure::Chars)
    }

    fn answers_in_words() -> bool {
        true
    }

    async fn crash_side() -> SignalChannel {
        SignalChannel::start().await
    }

    async fn start(tune: impl FnOnce(&mut Config)) -> SignalRig {
        init();
        let fake = FakeSignal::start().await;
        fake.add_group(
            GROUP,
            "Conformance",
            &[&person(Who::Owner), &person(Who::Other)],
        );
        let toml = format!(
            "[signal]\nurl = \"{}\"\naccount = \"{}\"\n\
             allowed_users = [\"{}\", \"{}\"]\nfree_response_groups = [\"{GROUP}\"]\n",
            fake.url(),
            fake.bot().number,
            person(Who::Owner).number,
            person(Who::Other).number,
        );
        let mut section = herald::config::from_toml(&toml).expect("a [signal] section");
        let config = |llm: &_, data: &_| {
            let mut c = test_config(llm, data);
            let table = section.sections.remove("signal").expect("the signal table");
            c.sections.insert("signal".into(), table);
            c
        };
        let core = Core::start(config, tune).await;
        fake.wait_connections(1, WAIT).await;
        SignalRig {
            fake,
            core,
            answers: Mutex::new(Vec::new()),
        }
    }

    fn core(&self) -> &Core {
        &self.core
    }

    async fn say(&self, who: Who, text: &str) {
        match who {
            Who::Stranger => self.fake.dm(&person(who), text),
            _ => self.fake.group_message(GROUP, &person(who), text, false),
        };
    }

    async fn photo(&self, bytes: &[u8], caption: &str) {
        let file = File {
            name: "photo.png",
            mime: "image/png",
            bytes,
        };
        self.fake
            .file_message(Some(GROUP), &person(Who::Owner), caption, file);
    }

    async fn document(&self, name: &str, mime: &str, bytes: &[u8]) {
        let file = File { name, mime, bytes };
        self.fake
            .file_message(Some(GROUP), &person(Who::Owner), "", file);
    }

    async fn question(&self) -> String {
        wait_for("an approval question", WAIT, async || {
            self.last_question().map(|(_, text)| text)
        })
        .await
    }

    async fn press(&self, who: Who, approve: bool) -> String {
        let (ts, _) = self.last_question().expect("a question to answer");
        let group = chat(Who::Owner);
        let before: Vec<u64> = self.fake.view(&group).into_iter().map(|m| m.0).collect();
        let word = if approve { "yes" } else { "no" };
        self.fake
            .reply(Some(GROUP), &person(who), word, &self.fake.bot(), ts);
        // The answer to a press quotes nothing; a reply of the agent quotes the message.
        let (answer, text) = wait_for("the press to be answered", WAIT, async || {
            self.fake
                .sent_to(&group)
                .into_iter()
                .find(|s| {
                    s.edit_of.is_none() && s.quote.is_none() && !before.contains(&s.timestamp)
                })
                .map(|s| (s.timestamp, s.message))
        })
        .await;
        self.answers.lock().unwrap().push(answer);
        text
    }

    async fn seen(&self, who: Who) -> Vec<Seen> {
        let chat = chat(who);
        let questions: Vec<u64> = self
            .fake
            .sent_to(&chat)
            .into_iter()
            .filter(|s| s.edit_of.is_none() && s.message.contains(ASK_IN_WORDS))
            .map(|s| s.timestamp)
            .collect();
        let answers = self.answers.lock().unwrap().clone();
        let mut seen = Vec::new();
        for (ts, text, files) in self.fake.view(&chat) {
            if questions.contains(&ts) || answers.contains(&ts) {
                continue;
            }
            if files.is_empty() {
                seen.push(Seen::Text(text));
                continue;
            }
            for f in files {
                seen.push(Seen::File {
                    name: f.name,
                    bytes: f.bytes,
                });
            }
        }
        seen
    }

    fn edits(&self) -> usize {
        self.fake.edits()
    }

    fn refuse_next_send(&self, secs: u64) {
        self.fake.rate_limit_next_send(secs);
    }

    fn send_times(&self) -> Vec<Instant> {
        self.fake
            .sent()
            .into_iter()
            .filter(|s| s.edit_of.is_none())
            .map(|s| s.at)
            .collect()
    }

    async fn stop(self) {
        self.core.stop().await;
    }
}
