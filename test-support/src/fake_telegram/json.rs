//! Bot API JSON shapes the fake answers with and injects, kept exact enough for teloxide 0.17 to
//! deserialize (a missing required field turns a whole answer into a client-side error).
//!
//! Must not: depend on fake state; these are pure builders other fakes and tests can reuse.

use serde_json::{json, Value};

/// Username of the fake bot, as `getMe` reports it (without the `@`).
pub const BOT_USERNAME: &str = "herald_test_bot";

/// Seconds since the epoch, as Telegram stamps `date`.
pub fn now_unix() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A human user with a predictable name derived from the id.
pub fn user_json(user_id: i64) -> Value {
    json!({
        "id": user_id,
        "is_bot": false,
        "first_name": format!("User{user_id}"),
        "username": format!("user{user_id}"),
        "language_code": "en",
    })
}

/// The bot's own user object; the id is the numeric prefix of the token, as on Telegram.
pub fn bot_user_json(token: &str) -> Value {
    let id: i64 = token
        .split(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(4242);
    json!({ "id": id, "is_bot": true, "first_name": "Herald Test", "username": BOT_USERNAME })
}

/// `getMe`'s answer: the bot user plus the flags teloxide's `Me` requires.
pub fn me_json(token: &str) -> Value {
    let mut me = bot_user_json(token);
    let extra = json!({
        "can_join_groups": true,
        "can_read_all_group_messages": false,
        "supports_inline_queries": false,
        "can_connect_to_business": false,
        "has_main_web_app": false,
    });
    merge(&mut me, extra);
    me
}

/// A chat object: positive ids are private chats, negative ids supergroups (forums when
/// `forum` is set, which topic messages need).
pub fn chat_json(chat_id: i64, forum: bool) -> Value {
    if chat_id > 0 {
        json!({ "id": chat_id, "type": "private", "first_name": format!("User{chat_id}"),
                "username": format!("user{chat_id}") })
    } else {
        json!({ "id": chat_id, "type": "supergroup", "title": format!("Group {chat_id}"),
                "is_forum": forum })
    }
}

/// A text message from `from_id` in `chat_id`; callers add threads, replies or entities by
/// editing the returned object.
pub fn message_json(message_id: i64, chat_id: i64, from_id: i64, text: &str) -> Value {
    json!({
        "message_id": message_id,
        "from": user_json(from_id),
        "chat": chat_json(chat_id, false),
        "date": now_unix(),
        "text": text,
    })
}

/// Marks `message` as sent in forum topic `thread_id`.
pub fn in_topic(message: &mut Value, thread_id: i64) {
    let chat_id = message["chat"]["id"].as_i64().unwrap_or_default();
    merge(
        message,
        json!({ "chat": chat_json(chat_id, true), "message_thread_id": thread_id,
                "is_topic_message": true }),
    );
}

/// Adds a `mention` entity covering the first occurrence of `mention` in the message text.
/// Offsets are in UTF-16 code units, as Telegram counts them.
pub fn with_mention(message: &mut Value, mention: &str) {
    let text = message["text"].as_str().unwrap_or_default().to_owned();
    let Some(at) = text.find(mention) else {
        panic!("mention {mention:?} does not occur in {text:?}");
    };
    let offset = text[..at].encode_utf16().count();
    let length = mention.encode_utf16().count();
    message["entities"] = json!([{ "type": "mention", "offset": offset, "length": length }]);
}

/// A minimal message that another one replies to (Telegram omits its own `reply_to_message`).
pub fn replied_message_json(message_id: i64, chat: &Value, from: Value, text: &str) -> Value {
    json!({ "message_id": message_id, "chat": chat, "from": from, "date": now_unix(), "text": text })
}

/// `{"update_id": N, "message": …}`.
pub fn message_update_json(update_id: i64, message: Value) -> Value {
    json!({ "update_id": update_id, "message": message })
}

/// Shallow-merges the keys of `extra` into `target` (both objects).
pub fn merge(target: &mut Value, extra: Value) {
    if let (Some(t), Value::Object(e)) = (target.as_object_mut(), extra) {
        t.extend(e);
    }
}
