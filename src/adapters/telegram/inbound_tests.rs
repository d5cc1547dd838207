//! Table tests for the update → event rule, on updates in Telegram's wire format.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{json, Value};
use teloxide::types::Update;

use super::inbound::{decide, BotIdentity, Decision, Rules};
use crate::domain::{ChatType, MediaKind, MediaSource, MessageKind};

const BOT_ID: u64 = 777;

fn me() -> BotIdentity {
    BotIdentity {
        id: BOT_ID,
        username: "herald_bot".into(),
    }
}

pub(super) fn user(id: u64, is_bot: bool) -> Value {
    json!({ "id": id, "is_bot": is_bot, "first_name": format!("U{id}"), "last_name": "L" })
}

pub(super) fn chat(id: i64, forum: bool) -> Value {
    if id > 0 {
        json!({ "id": id, "type": "private", "first_name": "U" })
    } else {
        json!({ "id": id, "type": "supergroup", "title": "G", "is_forum": forum })
    }
}

pub(super) fn msg(chat_id: i64, text: &str) -> Value {
    json!({ "message_id": 10, "from": user(5, false), "chat": chat(chat_id, false),
            "date": 1_700_000_000, "text": text })
}

fn entity(kind: &str, text: &str, needle: &str) -> Value {
    let at = text.find(needle).expect("needle in text");
    json!({ "type": kind, "offset": text[..at].encode_utf16().count(),
            "length": needle.encode_utf16().count() })
}

fn with_entities(mut m: Value, es: Vec<Value>) -> Value {
    m["entities"] = Value::Array(es);
    m
}

pub(super) fn update(kind: &str, m: Value) -> Update {
    Update::deserialize(&json!({ "update_id": 99, (kind): m })).expect("valid update")
}

pub(super) fn run(u: &Update, free: &[&str]) -> Decision {
    let free: HashSet<String> = free.iter().map(|s| s.to_string()).collect();
    let me = me();
    decide(
        u,
        &Rules {
            me: &me,
            free_response_chats: &free,
        },
    )
}

/// Expected outcome: `None` = ignored, `Some((kind, model text))` = ingested.
type Want = Option<(MessageKind, &'static str)>;

/// (case, update, free-response chats, expected outcome).
#[test]
fn decision_table() {
    let g = -100_200;
    let mention_text = "hey @herald_bot what's up";
    let other_mention = "hey @someone_else what's up";
    let cmd_me = "/new@herald_bot";
    let cmd_other = "/new@OtherBot";
    let mut reply_to_bot = msg(g, "and then?");
    reply_to_bot["reply_to_message"] = json!({ "message_id": 3, "from": user(BOT_ID, true),
        "chat": chat(g, false), "date": 1_700_000_000, "text": "earlier answer" });
    let mut reply_to_human = msg(g, "and then?");
    reply_to_human["reply_to_message"] = json!({ "message_id": 3, "from": user(8, false),
        "chat": chat(g, false), "date": 1_700_000_000, "text": "hi" });
    let mut from_bot = msg(1, "beep");
    from_bot["from"] = user(9, true);
    let mut service = msg(g, "x");
    service.as_object_mut().unwrap().remove("text");
    service["new_chat_members"] = json!([user(6, false)]);
    let mut photo = msg(1, "x");
    photo.as_object_mut().unwrap().remove("text");
    photo["photo"] = json!([
        { "file_id": "small", "file_unique_id": "s", "width": 90, "height": 90 },
        { "file_id": "large", "file_unique_id": "l", "width": 900, "height": 900 }
    ]);
    let mut captioned = photo.clone();
    captioned["caption"] = json!("what is this?");

    let cases: Vec<(&str, Update, Vec<&str>, Want)> = vec![
        (
            "private text",
            update("message", msg(1, "hello")),
            vec![],
            Some((MessageKind::Text, "hello")),
        ),
        (
            "private bare command",
            update(
                "message",
                with_entities(
                    msg(1, "/status"),
                    vec![entity("bot_command", "/status", "/status")],
                ),
            ),
            vec![],
            Some((MessageKind::Command, "/status")),
        ),
        (
            "group without mention",
            update("message", msg(g, "just chatting")),
            vec![],
            None,
        ),
        (
            "group mention",
            update(
                "message",
                with_entities(
                    msg(g, mention_text),
                    vec![entity("mention", mention_text, "@herald_bot")],
                ),
            ),
            vec![],
            Some((MessageKind::Text, "hey what's up")),
        ),
        (
            "group mention of someone else",
            update(
                "message",
                with_entities(
                    msg(g, other_mention),
                    vec![entity("mention", other_mention, "@someone_else")],
                ),
            ),
            vec![],
            None,
        ),
        (
            "group reply to the bot",
            update("message", reply_to_bot),
            vec![],
            Some((MessageKind::Text, "and then?")),
        ),
        (
            "group reply to a human",
            update("message", reply_to_human),
            vec![],
            None,
        ),
        (
            "group command for me",
            update(
                "message",
                with_entities(msg(g, cmd_me), vec![entity("bot_command", cmd_me, cmd_me)]),
            ),
            vec![],
            Some((MessageKind::Command, "/new")),
        ),
        (
            "group command for another bot",
            update(
                "message",
                with_entities(
                    msg(g, cmd_other),
                    vec![entity("bot_command", cmd_other, cmd_other)],
                ),
            ),
            vec![],
            None,
        ),
        (
            "free-response group",
            update("message", msg(g, "just chatting")),
            vec!["-100200"],
            Some((MessageKind::Text, "just chatting")),
        ),
        (
            "free-response group, other bot's command",
            update(
                "message",
                with_entities(
                    msg(g, cmd_other),
                    vec![entity("bot_command", cmd_other, cmd_other)],
                ),
            ),
            vec!["-100200"],
            None,
        ),
        (
            "edited message",
            update("edited_message", msg(1, "hello")),
            vec![],
            None,
        ),
        (
            "message from a bot",
            update("message", from_bot),
            vec![],
            None,
        ),
        (
            "service message",
            update("message", service),
            vec!["-100200"],
            None,
        ),
        (
            "photo without caption",
            update("message", photo),
            vec![],
            Some((MessageKind::Media, "")),
        ),
        (
            "photo with caption",
            update("message", captioned),
            vec![],
            Some((MessageKind::Text, "what is this?")),
        ),
        (
            "only the mention",
            update(
                "message",
                with_entities(
                    msg(g, "@herald_bot"),
                    vec![entity("mention", "@herald_bot", "@herald_bot")],
                ),
            ),
            vec![],
            Some((MessageKind::Text, "@herald_bot")),
        ),
    ];
    for (name, u, free, want) in cases {
        match (run(&u, &free), want) {
            (Decision::Ignore(_), None) => {}
            (Decision::Ingest(ev), Some((kind, text))) => {
                assert_eq!(ev.kind(), Some(kind), "{name}");
                assert_eq!(ev.text, text, "{name}");
            }
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn event_fields_are_mapped() {
    let mut m = msg(-100_300, "hi @herald_bot");
    m = with_entities(m, vec![entity("mention", "hi @herald_bot", "@herald_bot")]);
    m["chat"] = chat(-100_300, true);
    m["message_thread_id"] = json!(42);
    m["is_topic_message"] = json!(true);
    m["message_id"] = json!(77);
    m["reply_to_message"] = json!({ "message_id": 42, "from": user(8, false),
        "chat": chat(-100_300, true), "date": 1_700_000_000, "text": "topic root" });
    let Decision::Ingest(ev) = run(&update("message", m), &[]) else {
        panic!("not ingested")
    };
    assert_eq!(ev.chat_id, "-100300");
    assert_eq!(ev.thread_id.as_deref(), Some("42"));
    assert_eq!(ev.chat_type, ChatType::Thread);
    assert_eq!(ev.lane().as_str(), "telegram:-100300:42");
    assert_eq!(ev.platform_message_id, "-100300:77");
    assert_eq!(ev.reply_to.as_deref(), Some("-100300:42"));
    assert_eq!(ev.update_id, Some(99));
    assert_eq!(ev.sender_id, "5");
    assert_eq!(ev.sender_name, "U5 L");
    assert_eq!(ev.text, "hi");
}

#[test]
fn photo_attachment_is_the_largest_size() {
    let mut m = msg(1, "x");
    m.as_object_mut().unwrap().remove("text");
    m["caption"] = json!("look");
    m["photo"] = json!([
        { "file_id": "small", "file_unique_id": "s", "width": 90, "height": 90 },
        { "file_id": "large", "file_unique_id": "l", "width": 900, "height": 900 }
    ]);
    let Decision::Ingest(ev) = run(&update("message", m), &[]) else {
        panic!("not ingested")
    };
    assert_eq!(ev.attachments.len(), 1);
    assert_eq!(ev.attachments[0].kind, MediaKind::Photo);
    assert_eq!(
        ev.attachments[0].source,
        MediaSource::Telegram("large".into())
    );
    assert_eq!(ev.chat_type, ChatType::Dm);
}

#[test]
fn reply_thread_in_a_plain_supergroup_is_not_a_topic() {
    let mut m = msg(-100_400, "/help");
    m["message_thread_id"] = json!(5);
    let Decision::Ingest(ev) = run(&update("message", m), &[]) else {
        panic!("not ingested")
    };
    assert_eq!(ev.thread_id, None);
    assert_eq!(ev.lane().as_str(), "telegram:-100400");
}

/// Entities whose bounds are not character boundaries of the text (past its end, inside a
/// surrogate pair, overflowing) are dropped, never a panic; a well-formed one beside them still
/// counts. The first case is the input the `telegram_update` fuzz target crashed on.
#[test]
fn malformed_entities_are_dropped_without_a_panic() {
    let g = -100_200;
    let fuzz_crash = r#"{"update_id": 3, "message": {"message_id": 3, "from": {"id": 7,
        "is_bot": false, "first_name": "Ann", "username": "ann", "language_code": "en"},
        "chat": {"id": -100200, "type": "supergroup", "title": "Group", "is_forum": false},
        "date": 1700000000, "text": "hi @herald_t{st_bot how are you",
        "entities": [{"type": "mention", "offset": 3, "length": 92}]}}"#;
    let emoji = "😀 @herald_bot hi";
    let bad =
        |offset: u64, length: u64| json!({ "type": "mention", "offset": offset, "length": length });
    let cases: Vec<(&str, Update, Want)> = vec![
        (
            "mention past the end (fuzz crash)",
            Update::deserialize(&serde_json::from_str::<Value>(fuzz_crash).unwrap()).unwrap(),
            None,
        ),
        (
            "mention starting inside a surrogate pair",
            update("message", with_entities(msg(g, emoji), vec![bad(1, 12)])),
            None,
        ),
        (
            "mention ending inside a surrogate pair",
            update(
                "message",
                with_entities(msg(g, "@herald_bot😀"), vec![bad(0, 12)]),
            ),
            None,
        ),
        (
            "offset + length overflows",
            update(
                "message",
                with_entities(msg(1, "hello"), vec![bad(u64::MAX, 2)]),
            ),
            Some((MessageKind::Text, "hello")),
        ),
        (
            "a good mention beside a bad one",
            update(
                "message",
                with_entities(
                    msg(g, emoji),
                    vec![bad(3, 99), entity("mention", emoji, "@herald_bot")],
                ),
            ),
            Some((MessageKind::Text, "😀 hi")),
        ),
    ];
    for (case, u, want) in cases {
        let got = match run(&u, &[]) {
            Decision::Ignore(_) | Decision::Press { .. } => None,
            Decision::Ingest(ev) => Some((ev.kind().unwrap(), ev.text)),
        };
        assert_eq!(got, want.map(|(k, t)| (k, t.to_string())), "{case}");
    }
}
