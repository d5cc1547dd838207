//! Matrix's conformance rig: the adapter (matrix-sdk) against a real Synapse, through the gate
//! that notes when Synapse accepted each message and can answer one with a 429. The owner's
//! conversation is their encrypted direct chat with the bot (as Element makes one); the
//! stranger's is a direct chat of their own with the bot (made by the owner, since the bot
//! declines a stranger's invite, who then leaves it to the two of them). A person sees the bot's messages as their own client shows them:
//! decrypted, edits applied, files downloaded.
//!
//! Matrix has no buttons: the approval case asks in words and, as the suite declares for such
//! platforms, nobody answers; answering by reply and reaction is `e2e_matrix`'s.

use std::time::Instant;

use herald::adapters::split::Measure;
use herald::config::Config;
use herald::domain::LaneKey;
use herald_test_support::harness::wait_for;
use herald_test_support::promise::matrix::MatrixChannel;
use herald_test_support::synapse::Person;
use matrix_sdk::Room;

use super::rig_support::{Core, WAIT};
use super::{Caps, Rig, Seen, Who};
use crate::e2e_matrix::BOT;
use herald_test_support::synapse::{self, Gate, Synapse};

pub struct MatrixRig {
    synapse: Synapse,
    gate: Gate,
    owner: Person,
    other: Person,
    stranger: Person,
    owner_room: Room,
    stranger_room: Room,
    core: Core,
}

impl MatrixRig {
    fn person(&self, who: Who) -> &Person {
        who.pick(&self.owner, &self.other, &self.stranger)
    }

    fn room(&self, who: Who) -> &Room {
        match who {
            Who::Stranger => &self.stranger_room,
            _ => &self.owner_room,
        }
    }
}

impl Rig for MatrixRig {
    type Crash = MatrixChannel;
    const LANE: &'static str = "matrix:";

    fn lane(&self) -> String {
        LaneKey::from_parts("matrix", self.owner_room.room_id().as_str(), None)
            .as_str()
            .to_string()
    }

    fn caps() -> Caps {
        Caps::platform(herald::adapters::matrix::SPEC.caps, Measure::Chars)
    }

    async fn crash_side() -> MatrixChannel {
        MatrixChannel::start(20).await
    }

    async fn start(tune: impl FnOnce(&mut Config)) -> MatrixRig {
        let synapse = Synapse::start().await;
        let gate = Gate::start(&synapse.url()).await;
        let people = ["owner", "other", "stranger"];
        let section =
            synapse::bot_section(&synapse, gate.url(), &people, &["owner", "other"], "").await;
        let config = |llm: &_, data: &_| {
            let mut c = herald_test_support::harness::test_config(llm, data);
            synapse::add_section(&mut c, section);
            c
        };
        let core = Core::start(config, tune).await;
        let url = synapse.url();
        let owner = Person::login(&url, "owner", "owner").await;
        let other = Person::login(&url, "other", "other").await;
        let stranger = Person::login(&url, "stranger", "stranger").await;
        let owner_room = owner.dm(BOT).await;
        let stranger_id = Synapse::user_id("stranger");
        let theirs = owner.invite_room(&[BOT, &stranger_id], true).await;
        let stranger_room = stranger.join(&theirs).await;
        for member in [BOT, stranger_id.as_str()] {
            wait_for("the stranger's room to fill", WAIT, async || {
                owner.has_joined(&theirs, member).await.then_some(())
            })
            .await;
        }
        let room = owner.client.get_room(&theirs).expect("the stranger's room");
        room.leave()
            .await
            .expect("the owner leaves the stranger's room");
        MatrixRig {
            synapse,
            gate,
            owner,
            other,
            stranger,
            owner_room,
            stranger_room,
            core,
        }
    }

    fn core(&self) -> &Core {
        &self.core
    }

    async fn say(&self, who: Who, text: &str) {
        let room = self.room(who);
        self.person(who).say(room, text).await;
    }

    async fn photo(&self, bytes: &[u8], caption: &str) {
        self.owner
            .send_file(&self.owner_room, "photo.png", "image/png", bytes, caption)
            .await;
    }

    async fn document(&self, name: &str, mime: &str, bytes: &[u8]) {
        self.owner
            .send_file(&self.owner_room, name, mime, bytes, "")
            .await;
    }

    async fn question(&self) -> String {
        wait_for("an approval question", WAIT, async || {
            self.owner
                .from(self.owner_room.room_id(), BOT)
                .into_iter()
                .rfind(|s| s.body.contains(herald::lanes::ASK_IN_WORDS))
                .map(|s| s.body)
        })
        .await
    }

    async fn press(&self, who: Who, approve: bool) -> String {
        let room = self.owner_room.room_id();
        let q = self
            .owner
            .from(room, BOT)
            .into_iter()
            .rfind(|s| s.body.contains(herald::lanes::ASK_IN_WORDS))
            .expect("a question to answer");
        let before = self.owner.from(room, BOT).len();
        self.person(who)
            .react(
                &self.owner_room,
                &q.event_id,
                if approve { "✅" } else { "❌" },
            )
            .await;
        wait_for("the answer to be acknowledged", WAIT, async || {
            self.owner
                .from(room, BOT)
                .get(before)
                .map(|s| s.body.clone())
        })
        .await
    }

    async fn seen(&self, who: Who) -> Vec<Seen> {
        let room = self.room(who).room_id().to_owned();
        let person = self.person(who);
        // Everything Synapse accepted from the bot in this room has reached the person's
        // client (a sync is a moment behind the send).
        let sent: Vec<String> = self
            .gate
            .accepted()
            .into_iter()
            .filter(|(r, _)| r == room.as_str())
            .map(|(_, e)| e)
            .collect();
        wait_for("the person's client to catch up", WAIT, async || {
            sent.iter().all(|e| person.knows(e)).then_some(())
        })
        .await;
        let mut seen = Vec::new();
        for s in person.from(&room, BOT) {
            match s.msgtype.as_str() {
                "m.file" | "m.image" | "m.audio" | "m.video" => seen.push(Seen::File {
                    name: s.body.clone(),
                    bytes: person.download(&s).await,
                }),
                _ => seen.push(Seen::Text(s.body)),
            }
        }
        seen
    }

    fn edits(&self) -> usize {
        self.owner
            .from(self.owner_room.room_id(), BOT)
            .iter()
            .map(|s| s.edits)
            .sum()
    }

    fn refuse_next_send(&self, secs: u64) {
        self.gate.refuse_next_send(secs);
    }

    fn send_times(&self) -> Vec<Instant> {
        self.gate.send_times()
    }

    async fn stop(self) {
        self.core.stop().await;
        drop(self.synapse);
    }
}
