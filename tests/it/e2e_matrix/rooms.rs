//! Rooms beyond a direct chat: an unencrypted room where only a mention is answered, a thread
//! as its own lane, and an approval answered by reaction where only the requester counts.

use herald::domain::LaneKey;
use herald_test_support::fake_llm::Step;
use herald_test_support::harness::quiet;
use serde_json::json;

use super::{bot_said, World, BOT};

#[tokio::test]
async fn in_a_room_only_a_mention_is_answered_and_a_thread_is_its_own_lane() {
    let w = World::start(&["alice"], &["alice"], "", |_| {}).await;
    let alice = w.person("alice").await;
    let room = alice.room(&[BOT]).await;
    assert!(!room.latest_encryption_state().await.unwrap().is_encrypted());
    alice.say(&room, "hello everyone").await;
    alice.say(&room, "@herald:localhost what is the time").await;
    let said = bot_said(&alice, room.room_id(), 1).await;
    assert_eq!(said[0].body, "reply to: what is the time");
    assert_eq!(said[0].thread, None, "the room's main timeline");

    let root = alice.say(&room, "a thread starts here").await;
    alice
        .say_in_thread(&room, &root, "@herald:localhost in the thread")
        .await;
    let said = bot_said(&alice, room.room_id(), 2).await;
    assert_eq!(said[1].body, "reply to: in the thread");
    assert_eq!(
        said[1].thread.as_deref(),
        Some(root.as_str()),
        "answered in the thread"
    );
    quiet(w.app.store.as_ref()).await;
    let asked: Vec<String> = w.llm.requests().iter().map(|r| r.last_user()).collect();
    assert_eq!(
        asked,
        ["what is the time", "in the thread"],
        "nothing else reached the model"
    );
    let id = room.room_id().as_str();
    for lane in [
        LaneKey::from_parts("matrix", id, None),
        LaneKey::from_parts("matrix", id, Some(root.as_str())),
    ] {
        let session = w.app.store.session_current(&lane).await.unwrap();
        assert!(session.is_some(), "a conversation in {lane}");
    }
    w.stop().await;
}

#[tokio::test]
async fn an_approval_is_answered_by_the_requesters_reaction_only() {
    let skills = tempfile::tempdir().unwrap();
    let dir = skills.path().to_path_buf();
    let w = World::start(
        &["alice", "bob"],
        &["alice", "bob"],
        "require_mention = false",
        |c| {
            c.agent.skills_dir = Some(dir);
            c.tools.require_approval = vec!["skill_manage".into()];
        },
    )
    .await;
    let alice = w.person("alice").await;
    let bob = w.person("bob").await;
    let room = alice.room(&[BOT]).await;
    let bob_id = herald_test_support::synapse::Synapse::user_id("bob");
    alice
        .client
        .get_room(room.room_id())
        .unwrap()
        .invite_user_by_id(&matrix_sdk::ruma::UserId::parse(bob_id.as_str()).unwrap())
        .await
        .unwrap();
    let bob_room = bob.join(room.room_id()).await;
    let args = json!({"action": "create", "name": "mxtriage",
        "description": "Sort bug reports", "body": "1. Label it."});
    w.llm
        .push(Step::ToolCall("skill_manage".into(), args.to_string()));
    alice.say(&room, "make a triage skill").await;
    let question = bot_said(&alice, room.room_id(), 1).await.remove(0);
    assert!(question.body.contains("skill_manage"), "{}", question.body);
    assert!(
        question.body.contains(herald::lanes::ASK_IN_WORDS),
        "{}",
        question.body
    );

    bob.react(&bob_room, &question.event_id, "✅").await;
    let told_bob = bot_said(&alice, room.room_id(), 2).await.remove(1);
    assert!(
        !skills.path().join(".proposed/mxtriage").exists(),
        "bob's ✅ ran it"
    );
    assert_eq!(w.llm.request_count(), 1, "the turn is still parked");

    alice.react(&room, &question.event_id, "✅").await;
    let said = bot_said(&alice, room.room_id(), 4).await;
    let bodies: Vec<&str> = said.iter().map(|s| s.body.as_str()).collect();
    assert_ne!(told_bob.body, said[2].body, "bob was refused: {bodies:?}");
    assert!(
        bodies.contains(&"reply to: make a triage skill"),
        "{bodies:?}"
    );
    assert!(
        skills.path().join(".proposed/mxtriage").exists(),
        "the approved call ran"
    );
    w.stop().await;
}
