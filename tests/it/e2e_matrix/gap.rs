//! A restart after a busy while: more happened in a room than one `/sync` batch carries, so
//! Synapse cuts the room's timeline (`limited`). The message in the cut part must still be
//! answered: the adapter fetches the gap back before it stores the new sync position.

use herald::app::App;
use herald_test_support::harness::quiet;

use super::{bot_said, World, BOT};

/// More than the adapter's per-room timeline limit (200), so the batch after the restart is cut.
const CHATTER: usize = 210;

#[tokio::test]
async fn a_message_in_a_cut_timeline_after_a_restart_is_answered() {
    let w = World::start(&["alice"], &["alice"], "", |_| {}).await;
    let alice = w.person("alice").await;
    let room = alice.room(&[BOT]).await;
    alice.say(&room, "@herald:localhost first").await;
    bot_said(&alice, room.room_id(), 1).await;
    quiet(w.app.store.as_ref()).await;

    let World {
        synapse,
        gate,
        llm,
        app,
        config,
        _data,
    } = w;
    app.shutdown().await;
    alice
        .say(&room, "@herald:localhost while you were away")
        .await;
    for i in 0..CHATTER {
        alice.say(&room, &format!("chatter {i}")).await;
    }
    alice.say(&room, "@herald:localhost and now").await;
    let app = App::start(config.clone())
        .await
        .expect("herald starts again");

    let said = bot_said(&alice, room.room_id(), 3).await;
    let bodies: Vec<&str> = said.iter().map(|s| s.body.as_str()).collect();
    assert_eq!(
        bodies,
        [
            "reply to: first",
            "reply to: while you were away",
            "reply to: and now"
        ],
        "the message in the cut part is answered, in order"
    );
    quiet(app.store.as_ref()).await;
    let asked: Vec<String> = llm.requests().iter().map(|r| r.last_user()).collect();
    assert_eq!(asked, ["first", "while you were away", "and now"]);
    let w = World {
        synapse,
        gate,
        llm,
        app,
        config,
        _data,
    };
    w.stop().await;
}
