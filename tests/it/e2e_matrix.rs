//! End to end through the Matrix adapter against a real Synapse (`test-support/src/synapse`):
//! the real core and the fake model, the bot logged in with matrix-sdk through the gate, and
//! the people as real matrix-sdk clients with their own crypto stores. Every wait is bounded.

mod gap;
mod rooms;

use herald::app::App;
use herald::config::Config;
use herald_test_support::fake_llm::FakeLlm;
use herald_test_support::harness::{init, test_config, wait_for};
use herald_test_support::synapse::{self, Gate, Person, Shown, Synapse, WAIT};
use matrix_sdk::ruma::RoomId;

/// The bot's user id on every test homeserver.
pub const BOT: &str = "@herald:localhost";

/// A homeserver with the bot and the people registered, the core logged in as the bot.
pub struct World {
    pub synapse: Synapse,
    pub gate: Gate,
    pub llm: FakeLlm,
    pub app: App,
    /// What the core was started with, for a restart on the same data dir (`gap.rs`).
    config: Config,
    _data: tempfile::TempDir,
}

impl World {
    /// Synapse, the gate, `people` registered (`allowed` of them on the allowlist), the core
    /// with `extra` `[matrix]` lines and `tune` over its config.
    pub async fn start(
        people: &[&str],
        allowed: &[&str],
        extra: &str,
        tune: impl FnOnce(&mut Config),
    ) -> World {
        init();
        let synapse = Synapse::start().await;
        let gate = Gate::start(&synapse.url()).await;
        let section = synapse::bot_section(&synapse, gate.url(), people, allowed, extra).await;
        let llm = FakeLlm::start().await;
        let data = tempfile::tempdir().expect("temp dir");
        let mut c = test_config(&llm, &data);
        synapse::add_section(&mut c, section);
        tune(&mut c);
        let app = App::start(c.clone()).await.expect("herald starts");
        World {
            synapse,
            gate,
            llm,
            app,
            config: c,
            _data: data,
        }
    }

    /// `name` logged in on a fresh device.
    pub async fn person(&self, name: &str) -> Person {
        Person::login(&self.synapse.url(), name, name).await
    }

    pub async fn stop(self) {
        self.app.shutdown().await;
    }
}

/// Waits until the bot said at least `n` things in `room` as `person` sees it; returns them.
pub async fn bot_said(person: &Person, room: &RoomId, n: usize) -> Vec<Shown> {
    wait_for(&format!("{n} messages from the bot"), WAIT, async || {
        let said = person.from(room, BOT);
        (said.len() >= n).then_some(said)
    })
    .await
}

#[tokio::test]
async fn a_person_logs_in_on_synapse() {
    init();
    let synapse = Synapse::start().await;
    let user = synapse.register("alice", "alice").await;
    assert_eq!(user, "@alice:localhost");
    let alice = Person::login(&synapse.url(), "alice", "alice").await;
    assert_eq!(alice.user_id.as_str(), "@alice:localhost");
    assert!(alice.client.device_id().is_some(), "a device of her own");
}

#[tokio::test]
async fn an_encrypted_direct_message_is_answered() {
    let w = World::start(&["alice"], &["alice"], "", |_| {}).await;
    let alice = w.person("alice").await;
    let room = alice.dm(BOT).await;
    assert!(
        room.latest_encryption_state().await.unwrap().is_encrypted(),
        "Element's default"
    );
    alice.say(&room, "hello there").await;
    let said = bot_said(&alice, room.room_id(), 1).await;
    assert_eq!(said[0].body, "reply to: hello there");
    assert_eq!(said[0].msgtype, "m.text");
    assert_eq!(
        w.gate.send_times().len(),
        1,
        "one message accepted by the homeserver"
    );
    let asked: Vec<String> = w.llm.requests().iter().map(|r| r.last_user()).collect();
    assert_eq!(asked, ["hello there"]);
    w.stop().await;
}
