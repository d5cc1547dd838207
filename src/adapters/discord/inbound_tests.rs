//! Table tests for the hearing rules and the translation, on messages shaped as Discord sends
//! them (parsed by serenity from JSON, not built by hand).

use serde_json::{json, Value};
use serenity::all::{ChannelId, Message, UserId};

use super::*;

const BOT: u64 = 1000;
const USER: u64 = 42;
const CHANNEL: u64 = 600;
const THREAD: u64 = 601;

fn user(id: u64, bot: bool) -> Value {
    json!({"id": id.to_string(), "username": format!("user{id}"), "discriminator": "0",
           "global_name": null, "avatar": null, "bot": bot})
}

/// A message; `extra` is merged in (mentions, referenced_message, guild_id, member, …).
fn message(channel: u64, author: Value, content: &str, extra: Value) -> Message {
    let mut m = json!({
        "id": "7001", "channel_id": channel.to_string(), "author": author, "content": content,
        "timestamp": "2025-01-01T00:00:00.000Z", "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [],
        "embeds": [], "pinned": false, "type": 0, "flags": 0,
    });
    if let (Some(m), Some(extra)) = (m.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(m).expect("a valid Discord message")
}

fn guild(extra: Value) -> Value {
    let mut v = json!({"guild_id": "500"});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

fn gate(free: &[&str]) -> Gate {
    Gate {
        require_mention: true,
        free_response: free.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn hearing_table() {
    let bot = UserId::new(BOT);
    let thread = Place::Thread {
        parent: ChannelId::new(CHANNEL),
    };
    let bot_msg = message(CHANNEL, user(BOT, true), "earlier answer", guild(json!({})));
    let other_msg = message(CHANNEL, user(77, false), "someone else", guild(json!({})));
    let reply_to = |m: &Message| {
        guild(json!({
            "type": 19,
            "message_reference": {"message_id": m.id.get().to_string(), "channel_id": CHANNEL.to_string()},
            "referenced_message": serde_json::to_value(m).unwrap(),
        }))
    };
    // (what, message, place, free-response channels, heard)
    let cases: Vec<(&str, Message, Place, &[&str], bool)> = vec![
        (
            "dm",
            message(9, user(USER, false), "hi", json!({})),
            Place::Dm,
            &[],
            true,
        ),
        (
            "guild, no mention",
            message(CHANNEL, user(USER, false), "hi all", guild(json!({}))),
            Place::Channel,
            &[],
            false,
        ),
        (
            "guild, mention",
            message(
                CHANNEL,
                user(USER, false),
                "<@1000> hi",
                guild(json!({"mentions": [user(BOT, true)]})),
            ),
            Place::Channel,
            &[],
            true,
        ),
        (
            "guild, reply to the bot",
            message(CHANNEL, user(USER, false), "and then?", reply_to(&bot_msg)),
            Place::Channel,
            &[],
            true,
        ),
        (
            "guild, reply to someone else",
            message(
                CHANNEL,
                user(USER, false),
                "and then?",
                reply_to(&other_msg),
            ),
            Place::Channel,
            &[],
            false,
        ),
        (
            "free-response channel",
            message(CHANNEL, user(USER, false), "hi all", guild(json!({}))),
            Place::Channel,
            &["600"],
            true,
        ),
        (
            "thread of a free-response channel",
            message(THREAD, user(USER, false), "hi", guild(json!({}))),
            thread,
            &["600"],
            true,
        ),
        (
            "thread, no mention",
            message(THREAD, user(USER, false), "hi", guild(json!({}))),
            thread,
            &[],
            false,
        ),
        (
            "our own message",
            message(9, user(BOT, true), "hello", json!({})),
            Place::Dm,
            &[],
            false,
        ),
        (
            "another bot",
            message(9, user(55, true), "beep", json!({})),
            Place::Dm,
            &[],
            false,
        ),
        (
            "webhook",
            message(9, user(USER, false), "hook", json!({"webhook_id": "3"})),
            Place::Dm,
            &[],
            false,
        ),
        (
            "system message (pin)",
            message(9, user(USER, false), "", json!({"type": 6})),
            Place::Dm,
            &[],
            false,
        ),
        (
            "bare mention, nothing said",
            message(
                CHANNEL,
                user(USER, false),
                "<@1000>",
                guild(json!({"mentions": [user(BOT, true)]})),
            ),
            Place::Channel,
            &[],
            false,
        ),
    ];
    for (what, msg, place, free, heard) in cases {
        assert_eq!(
            translate(&msg, place, bot, &gate(free)).is_some(),
            heard,
            "{what}"
        );
    }
}

#[test]
fn translation_fills_lane_sender_reply_and_attachments() {
    let bot = UserId::new(BOT);
    let msg = message(
        THREAD,
        user(USER, false),
        "<@!1000> /new please",
        guild(json!({
            "mentions": [user(BOT, true)],
            "member": {"roles": ["900"], "nick": "Ali", "joined_at": "2024-01-01T00:00:00Z",
                       "deaf": false, "mute": false, "flags": 0},
            "type": 19,
            "message_reference": {"message_id": "6999", "channel_id": THREAD.to_string()},
            "attachments": [{"id": "1", "filename": "a.png", "size": 3, "url": "https://cdn/a.png",
                             "proxy_url": "https://media/a.png", "content_type": "image/png"}],
        })),
    );
    let place = Place::Thread {
        parent: ChannelId::new(CHANNEL),
    };
    let ev = translate(&msg, place, bot, &gate(&[])).expect("heard");
    assert_eq!(ev.lane().as_str(), "discord:600:601");
    assert_eq!(ev.chat_type, ChatType::Thread);
    assert_eq!(ev.text, "/new please");
    assert_eq!(ev.kind(), Some(MessageKind::Command));
    assert_eq!(
        (ev.sender_id.as_str(), ev.sender_name.as_str()),
        ("42", "Ali")
    );
    assert_eq!(ev.sender_roles, vec!["900".to_string()]);
    assert_eq!(ev.platform_message_id, "7001");
    assert_eq!(ev.reply_to.as_deref(), Some("6999"));
    assert_eq!(
        ev.attachments,
        vec![{
            let mut a = Attachment::new(
                MediaKind::Photo,
                MediaSource::Url("https://cdn/a.png".into()),
            );
            a.mime = Some("image/png".into());
            a.size = Some(3);
            a.name = Some("a.png".into());
            a
        }]
    );

    let dm = message(
        9,
        user(USER, false),
        "",
        json!({"attachments": [
        {"id": "1", "filename": "a.txt", "size": 3, "url": "https://cdn/a.txt", "proxy_url": "https://media/a.txt"}]}),
    );
    let ev = translate(&dm, Place::Dm, bot, &gate(&[])).expect("heard");
    assert_eq!(
        (ev.lane().as_str(), ev.kind().unwrap(), ev.chat_type),
        ("discord:9", MessageKind::Media, ChatType::Dm)
    );
    assert!(
        ev.can_start_turn(),
        "a bare attachment is read and answered"
    );
}

#[test]
fn mention_stripping() {
    let bot = UserId::new(BOT);
    for (input, want) in [
        ("<@1000> hello", "hello"),
        ("hello <@!1000>", "hello"),
        ("<@1000>handoff", "handoff"),
        ("ask <@1001> too", "ask <@1001> too"),
    ] {
        assert_eq!(strip_mention(input, bot), want, "{input:?}");
    }
}
