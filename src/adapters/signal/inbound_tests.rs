//! Envelope → decision, table by table: lanes, group addressing, mentions, reactions, files,
//! and what is not for the core.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::inbound::{decide, Decision, Rules};
use crate::domain::{ChatType, MessageKind, Origin};

const BOT: &str = "+15550100000";
const ALICE: &str = "+15550100001";
const ALICE_UUID: &str = "5e1a0000-0000-4000-8000-015550100001";
const GROUP: &str = "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI=";

fn envelope(data: Value) -> Value {
    let mut message = json!({"timestamp": 1700000000123u64, "message": null,
        "expiresInSeconds": 0, "viewOnce": false});
    message
        .as_object_mut()
        .unwrap()
        .extend(data.as_object().unwrap().clone());
    json!({"envelope": {"source": ALICE, "sourceNumber": ALICE, "sourceUuid": ALICE_UUID,
        "sourceName": "Alice", "sourceDevice": 1, "timestamp": 1700000000123u64,
        "dataMessage": message}, "account": BOT})
}

fn run(data: Value, free: &[&str], allowed: &[&str]) -> Decision {
    let free: HashSet<String> = free.iter().map(|s| s.to_string()).collect();
    let allowed: HashSet<String> = allowed.iter().map(|s| s.to_string()).collect();
    let rules = Rules {
        account: BOT,
        uuid: None,
        free_response_groups: &free,
        allowed: &allowed,
    };
    decide(&envelope(data), &rules).expect("reads")
}

fn ingested(d: Decision) -> super::inbound::Inbound {
    match d {
        Decision::Ingest(i) => *i,
        other => panic!("not ingested: {other:?}"),
    }
}

#[test]
fn a_direct_message_is_its_senders_lane_keyed_by_author_and_time() {
    let i = ingested(run(json!({"message": "hello\nthere"}), &[], &[]));
    let ev = &i.event;
    assert_eq!(ev.lane().as_str(), "signal:15550100001");
    assert_eq!(ev.chat_type, ChatType::Dm);
    assert_eq!(ev.sender_id, ALICE);
    assert_eq!(ev.sender_name, "Alice");
    assert_eq!(ev.text, "hello\nthere");
    assert_eq!(
        ev.platform_message_id,
        format!("{ALICE_UUID}/1700000000123")
    );
    // Someone allowed by their uuid is known by it.
    let i = ingested(run(json!({"message": "hi"}), &[], &[ALICE_UUID]));
    assert_eq!(i.event.sender_id, ALICE_UUID);
    assert_eq!(i.event.lane().as_str(), format!("signal:{ALICE_UUID}"));
}

#[test]
fn a_group_answers_on_mention_on_a_reply_to_the_bot_or_when_free() {
    let group = json!({"groupId": GROUP, "groupName": "Ops", "revision": 1, "type": "DELIVER"});
    let plain = json!({"message": "lunch?", "groupInfo": group});
    assert_eq!(
        run(plain.clone(), &[], &[]),
        Decision::Ignore("a group message not addressed to the bot")
    );
    let free = ingested(run(plain, &[GROUP], &[]));
    assert_eq!(
        free.event.lane().as_str(),
        "signal:group:Pmpi-EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI"
    );
    assert_eq!(free.event.chat_type, ChatType::Group);

    let mention = json!({"message": "\u{FFFC} deploy \u{FFFC} now", "groupInfo": group,
        "mentions": [
            {"name": BOT, "number": BOT, "uuid": null, "start": 0, "length": 1},
            {"name": "Bob", "number": "+15550100002", "uuid": null, "start": 9, "length": 1}]});
    let i = ingested(run(mention, &[], &[]));
    assert_eq!(i.event.text, "deploy @Bob now");

    let only = json!({"message": "\u{FFFC}", "groupInfo": group,
        "mentions": [{"name": BOT, "number": BOT, "uuid": null, "start": 0, "length": 1}]});
    assert_eq!(ingested(run(only, &[], &[])).event.text, "@bot");

    let reply = json!({"message": "and then?", "groupInfo": group,
        "quote": {"id": 1699999999000u64, "author": BOT, "authorNumber": BOT,
            "authorUuid": null, "text": "", "attachments": []}});
    let i = ingested(run(reply, &[], &[]));
    assert_eq!(i.quotes.as_deref(), Some("1699999999000"));

    let update = json!({"message": null,
        "groupInfo": {"groupId": GROUP, "type": "UPDATE", "revision": 2}});
    assert_eq!(
        run(update, &[GROUP], &[]),
        Decision::Ignore("a group update")
    );
}

#[test]
fn reactions_to_the_bot_may_answer_and_others_are_ignored() {
    let to_bot = json!({"reaction": {"emoji": "✅", "targetAuthor": BOT, "targetAuthorNumber": BOT,
        "targetAuthorUuid": null, "targetSentTimestamp": 1699999999000u64, "isRemove": false}});
    match run(to_bot, &[], &[]) {
        Decision::React(r) => {
            assert_eq!(r.emoji, "✅");
            assert_eq!(r.target, "1699999999000");
            assert_eq!(r.chat_id, "15550100001");
        }
        other => panic!("{other:?}"),
    }
    let to_other = json!({"reaction": {"emoji": "✅", "targetAuthorNumber": "+1555", "targetSentTimestamp": 1u64}});
    assert!(matches!(run(to_other, &[], &[]), Decision::Ignore(_)));
}

#[test]
fn files_unreadable_kinds_and_what_is_not_a_message() {
    let photo = json!({"message": "what is this?", "attachments": [{"contentType": "image/png",
        "filename": "photo.png", "id": "att1.png", "size": 19}]});
    let i = ingested(run(photo, &[], &[]));
    assert_eq!(i.files.len(), 1);
    assert_eq!(i.files[0].id, "att1.png");
    assert_eq!(i.source, ("recipient", ALICE.to_string()));
    let bare = json!({"attachments": [{"contentType": "text/markdown", "filename": "notes.md",
        "id": "att2.md", "size": 9}]});
    assert_eq!(
        ingested(run(bare, &[], &[])).event.origin,
        Origin::person(MessageKind::Media)
    );

    let sticker = json!({"sticker": {"packId": "9a", "stickerId": 3}});
    match run(sticker, &[], &[]) {
        Decision::Unreadable(ev) => assert_eq!(ev.origin, Origin::person(MessageKind::Service)),
        other => panic!("{other:?}"),
    }
    let receipt = json!({"envelope": {"sourceNumber": ALICE, "timestamp": 1u64,
        "receiptMessage": {"when": 1u64, "isDelivery": true, "timestamps": [1u64]}}});
    let rules = Rules {
        account: BOT,
        uuid: None,
        free_response_groups: &HashSet::new(),
        allowed: &HashSet::new(),
    };
    assert!(matches!(
        decide(&receipt, &rules).unwrap(),
        Decision::Ignore(_)
    ));
    let own = json!({"envelope": {"sourceNumber": BOT, "timestamp": 1u64,
        "dataMessage": {"timestamp": 1u64, "message": "me"}}});
    assert_eq!(
        decide(&own, &rules).unwrap(),
        Decision::Ignore("our own message")
    );
    assert!(decide(&json!({"envelope": {"timestamp": "x"}}), &rules).is_err());
}
