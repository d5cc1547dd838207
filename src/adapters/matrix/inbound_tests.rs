//! Table tests of `inbound::decide` on events in Matrix's wire format (as /sync delivers them,
//! after the SDK decrypted them).

use std::collections::HashSet;

use serde_json::{json, Value};

use super::inbound::{decide, Decision, Place, Rules};
use crate::domain::{ChatType, MessageKind};

const ME: &str = "@herald:hs";
const ROOM: &str = "!room:hs";

fn text(body: &str) -> Value {
    json!({
        "type": "m.room.message", "sender": "@alice:hs", "event_id": "$e1",
        "origin_server_ts": 1_700_000_000_000_i64,
        "content": { "msgtype": "m.text", "body": body },
    })
}

fn run(event: &Value, direct: bool, free: &[&str]) -> Decision {
    let free: HashSet<String> = free.iter().map(|s| s.to_string()).collect();
    let rules = Rules {
        me: ME,
        require_mention: true,
        free_response_rooms: &free,
    };
    let place = Place {
        room_id: ROOM,
        direct,
    };
    decide(event, place, &rules, false)
}

fn ingested(d: Decision) -> crate::domain::MessageEvent {
    match d {
        Decision::Ingest { event, .. } => *event,
        other => panic!("not ingested: {other:?}"),
    }
}

#[test]
fn a_direct_message_is_ingested_in_the_room_lane() {
    let ev = ingested(run(&text("hello"), true, &[]));
    assert_eq!(ev.chat_id, ROOM);
    assert_eq!(ev.chat_type, ChatType::Dm);
    assert_eq!(ev.platform_message_id, "$e1");
    assert_eq!(ev.sender_id, "@alice:hs");
    assert_eq!(ev.text, "hello");
    assert_eq!(
        ev.lane().as_str(),
        crate::domain::LaneKey::from_parts("matrix", ROOM, None).as_str()
    );
}

#[test]
fn rooms_need_a_mention_or_a_free_response_room() {
    assert!(matches!(
        run(&text("hello all"), false, &[]),
        Decision::Ignore(_)
    ));
    let by_id = ingested(run(&text("@herald:hs: what time is it"), false, &[]));
    assert_eq!(by_id.text, "what time is it");
    assert_eq!(by_id.chat_type, ChatType::Group);
    let mut pill = text("Herald: hi");
    pill["content"]["m.mentions"] = json!({ "user_ids": [ME] });
    assert_eq!(ingested(run(&pill, false, &[])).text, "Herald: hi");
    assert_eq!(
        ingested(run(&text("hello all"), false, &[ROOM])).text,
        "hello all"
    );
}

#[test]
fn a_thread_is_its_own_lane() {
    let mut ev = text("in the thread");
    ev["content"]["m.relates_to"] = json!({
        "rel_type": "m.thread", "event_id": "$root",
        "is_falling_back": true, "m.in_reply_to": { "event_id": "$root" },
    });
    let d = run(&ev, true, &[]);
    let Decision::Ingest { event, words, .. } = d else {
        panic!("not ingested");
    };
    assert_eq!(event.thread_id.as_deref(), Some("$root"));
    assert_eq!(event.chat_type, ChatType::Thread);
    assert_eq!(words.in_reply_to, None, "the fallback reply is not a reply");
}

#[test]
fn own_echoes_notices_edits_and_state_are_ignored() {
    let mut own = text("hi");
    own["sender"] = json!(ME);
    let mut notice = text("beep");
    notice["content"]["msgtype"] = json!("m.notice");
    let mut edit = text("* fixed");
    edit["content"]["m.relates_to"] = json!({ "rel_type": "m.replace", "event_id": "$e0" });
    let mut state = text("x");
    state["state_key"] = json!("");
    for ev in [own, notice, edit, state, json!({"type": "m.room.message"})] {
        assert!(matches!(run(&ev, true, &[]), Decision::Ignore(_)), "{ev}");
    }
}

#[test]
fn a_reply_names_the_message_it_answers() {
    let mut ev = text("> <@herald:hs> Run it?\n\nyes");
    ev["content"]["m.relates_to"] = json!({ "m.in_reply_to": { "event_id": "$question" } });
    let Decision::Ingest { event, words, .. } = run(&ev, true, &[]) else {
        panic!("not ingested");
    };
    assert_eq!(event.text, "yes", "the quoted fallback is cut");
    assert_eq!(words.in_reply_to.as_deref(), Some("$question"));
    assert_eq!(words.text, "yes");
}

#[test]
fn a_reaction_is_an_answer_only() {
    let ev = json!({
        "type": "m.reaction", "sender": "@alice:hs", "event_id": "$r1",
        "content": { "m.relates_to": { "rel_type": "m.annotation", "event_id": "$q", "key": "✅" } },
    });
    let Decision::React(words) = run(&ev, false, &[]) else {
        panic!("not a reaction");
    };
    assert_eq!(words.text, "✅");
    assert_eq!(words.in_reply_to.as_deref(), Some("$q"));
    assert!(words.reaction);
}

#[test]
fn media_carries_its_content_and_caption() {
    let ev = json!({
        "type": "m.room.message", "sender": "@alice:hs", "event_id": "$img",
        "content": { "msgtype": "m.image", "body": "what is this", "filename": "cat.png",
            "url": "mxc://hs/abc", "info": { "mimetype": "image/png", "size": 1234 } },
    });
    let Decision::Ingest { event, media, .. } = run(&ev, true, &[]) else {
        panic!("not ingested");
    };
    assert_eq!(event.text, "what is this");
    let content = media.expect("media content");
    let (kind, name, mime, size) = super::inbound::announced(&content).unwrap();
    assert_eq!(kind, crate::domain::MediaKind::Photo);
    assert_eq!(
        (name.as_str(), mime.as_deref(), size),
        ("cat.png", Some("image/png"), Some(1234))
    );
    let mut bare = ev.clone();
    bare["content"]["body"] = json!("cat.png");
    let Decision::Ingest { event, .. } = run(&bare, true, &[]) else {
        panic!("not ingested");
    };
    assert_eq!(
        event.origin,
        crate::domain::Origin::person(MessageKind::Media)
    );
}

#[test]
fn an_undecryptable_event_asks_the_sender() {
    let ev = json!({
        "type": "m.room.encrypted", "sender": "@alice:hs", "event_id": "$enc",
        "content": { "algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "…" },
    });
    let free = HashSet::new();
    let rules = Rules {
        me: ME,
        require_mention: true,
        free_response_rooms: &free,
    };
    let d = decide(
        &ev,
        Place {
            room_id: ROOM,
            direct: true,
        },
        &rules,
        true,
    );
    assert_eq!(
        d,
        Decision::Undecryptable {
            room_id: ROOM.into(),
            thread_id: None,
            sender_id: "@alice:hs".into(),
            event_id: "$enc".into(),
        }
    );
}

#[test]
fn an_invite_names_its_sender_and_says_whether_the_room_is_encrypted() {
    use super::inbound::{invite, Invite};
    let member = |who: &str, membership: &str, sender: &str| {
        json!({ "type": "m.room.member", "state_key": who, "sender": sender,
                "content": { "membership": membership } })
    };
    let name = json!({ "type": "m.room.name", "state_key": "", "sender": "@alice:hs",
                       "content": { "name": "Plans" } });
    let plain = [
        member("@alice:hs", "join", "@alice:hs"),
        name.clone(),
        member(ME, "invite", "@alice:hs"),
    ];
    assert_eq!(
        invite(&plain, ME),
        Some(Invite {
            inviter: "@alice:hs".into(),
            encrypted: false,
            direct: false,
        })
    );
    let mut dm = plain.to_vec();
    dm[2]["content"]["is_direct"] = json!(true);
    assert!(invite(&dm, ME).unwrap().direct, "a direct chat's invite");
    let mut encrypted = plain.to_vec();
    encrypted.push(
        json!({ "type": "m.room.encryption", "state_key": "", "sender": "@alice:hs",
                           "content": { "algorithm": "m.megolm.v1.aes-sha2" } }),
    );
    assert!(invite(&encrypted, ME).unwrap().encrypted);
    // Someone else's invite in the same room is not the bot's.
    let others = [member("@bob:hs", "invite", "@mallory:hs"), name];
    assert_eq!(invite(&others, ME), None);
}
