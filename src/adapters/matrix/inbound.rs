//! A Matrix timeline event → what the core should do with it, decided from the event's JSON
//! (the wire format; an encrypted event arrives here already decrypted by the SDK).
//!
//! One decision per event: ingest it as a `MessageEvent`, hand it to the approvals as a reply
//! in words or a reaction, tell the sender it could not be decrypted, or ignore it with a
//! reason. Lanes: `matrix:<room id>`, and a thread (`rel_type: m.thread`) is
//! `matrix:<room id>:<thread root event id>`. A direct chat (`m.direct`) is always
//! answered; in a room Herald answers when mentioned (`m.mentions`, or its user id in the
//! text), in a free-response room, or with `require_mention = false`. Never ingested: the bot's
//! own echoes, notices (`m.notice`, what bots send), edits and state events.
//!
//! The inbox dedupes on the event id, so a sync replayed after a crash is harmless.
//!
//! Must not: do I/O, or let a Matrix type out of this file: the decision carries our types.

use std::collections::HashSet;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

use super::MATRIX;
use crate::domain::{ChatType, MediaKind, MessageEvent, MessageKind, Origin};

/// What the adapter knows of a room and of itself when it reads an event.
pub struct Rules<'a> {
    /// The bot's user id.
    pub me: &'a str,
    pub require_mention: bool,
    pub free_response_rooms: &'a HashSet<String>,
}

/// Where an event was said.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub room_id: &'a str,
    /// The room is a direct chat (`m.direct`).
    pub direct: bool,
}

/// A reply in words or a reaction that may answer an approval question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Words {
    pub room_id: String,
    pub thread_id: Option<String>,
    pub sender_id: String,
    pub text: String,
    pub in_reply_to: Option<String>,
    /// A reaction: never a message for the agent, whatever the approvals say.
    pub reaction: bool,
}

/// What to do with one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// A person's message: offered to the approvals first (`words`), then ingested.
    Ingest {
        event: Box<MessageEvent>,
        words: Words,
        /// Media to fetch (and decrypt) before the inbox write: the event's `content`.
        media: Option<Value>,
    },
    /// A reaction: only ever an answer to a question.
    React(Words),
    /// An encrypted event the bot cannot read (no room key): the sender is asked to verify
    /// the bot's device or resend.
    Undecryptable {
        room_id: String,
        thread_id: Option<String>,
        sender_id: String,
        event_id: String,
    },
    /// Not for the core; the reason goes to the debug log.
    Ignore(&'static str),
}

/// Decides what one timeline event means. `encrypted_unreadable`: the SDK could not decrypt it.
pub fn decide(
    event: &Value,
    place: Place<'_>,
    rules: &Rules<'_>,
    encrypted_unreadable: bool,
) -> Decision {
    let str_at = |ptr: &str| event.pointer(ptr).and_then(Value::as_str);
    let (Some(sender), Some(event_id)) = (str_at("/sender"), str_at("/event_id")) else {
        return Decision::Ignore("an event without a sender or an id");
    };
    if sender == rules.me {
        return Decision::Ignore("our own echo");
    }
    if event.get("state_key").is_some() {
        return Decision::Ignore("a state event");
    }
    if encrypted_unreadable {
        return Decision::Undecryptable {
            room_id: place.room_id.to_string(),
            thread_id: thread_of(event),
            sender_id: sender.to_string(),
            event_id: event_id.to_string(),
        };
    }
    match str_at("/type") {
        Some("m.room.message") => message(event, sender, event_id, place, rules),
        Some("m.reaction") => reaction(event, sender, place),
        _ => Decision::Ignore("not a message"),
    }
}

fn reaction(event: &Value, sender: &str, place: Place<'_>) -> Decision {
    let rel = event.pointer("/content/m.relates_to");
    let key = rel.and_then(|r| r.get("key")).and_then(Value::as_str);
    let target = rel.and_then(|r| r.get("event_id")).and_then(Value::as_str);
    let (Some(key), Some(target)) = (key, target) else {
        return Decision::Ignore("a reaction without a key or a target");
    };
    Decision::React(Words {
        room_id: place.room_id.to_string(),
        thread_id: None,
        sender_id: sender.to_string(),
        text: key.to_string(),
        in_reply_to: Some(target.to_string()),
        reaction: true,
    })
}

fn message(
    event: &Value,
    sender: &str,
    event_id: &str,
    place: Place<'_>,
    rules: &Rules<'_>,
) -> Decision {
    let content = event.get("content").cloned().unwrap_or(Value::Null);
    let rel_type = content
        .pointer("/m.relates_to/rel_type")
        .and_then(Value::as_str);
    if rel_type == Some("m.replace") {
        return Decision::Ignore("an edit");
    }
    let msgtype = content.get("msgtype").and_then(Value::as_str).unwrap_or("");
    let media = matches!(msgtype, "m.image" | "m.file" | "m.audio" | "m.video");
    if !media && !matches!(msgtype, "m.text" | "m.emote") {
        return Decision::Ignore("a notice or another message type");
    }
    let body = content.get("body").and_then(Value::as_str).unwrap_or("");
    let addressed = mentioned(&content, body, rules.me);
    let free = !rules.require_mention || rules.free_response_rooms.contains(place.room_id);
    if !place.direct && !addressed && !free {
        return Decision::Ignore("a room message not addressed to the bot");
    }
    let thread = thread_of(event);
    let reply_to = content
        .pointer("/m.relates_to/m.in_reply_to/event_id")
        .and_then(Value::as_str)
        .filter(|_| rel_type != Some("m.thread") || !is_fallback(&content));
    let caption = if media {
        media_caption(&content)
    } else {
        strip_reply_fallback(body)
    };
    let text = without_mention(&caption, rules.me);
    let kind = if text.trim_start().starts_with('/') {
        MessageKind::Command
    } else if media && text.trim().is_empty() {
        MessageKind::Media
    } else {
        MessageKind::Text
    };
    let mut ev = MessageEvent::text(MATRIX, place.room_id, sender, &text);
    ev.chat_type = match (&thread, place.direct) {
        (Some(_), _) => ChatType::Thread,
        (None, true) => ChatType::Dm,
        (None, false) => ChatType::Group,
    };
    ev.thread_id = thread.clone();
    ev.platform_message_id = event_id.to_string();
    ev.reply_to = Some(event_id.to_string());
    ev.timestamp = event_time(event);
    ev.origin = Origin::person(kind);
    let words = Words {
        room_id: place.room_id.to_string(),
        thread_id: thread,
        sender_id: sender.to_string(),
        text: text.clone(),
        in_reply_to: reply_to.map(str::to_string),
        reaction: false,
    };
    Decision::Ingest {
        event: Box::new(ev),
        words,
        media: media.then_some(content),
    }
}

/// The thread root of an event in a thread.
fn thread_of(event: &Value) -> Option<String> {
    let rel = event.pointer("/content/m.relates_to")?;
    (rel.get("rel_type").and_then(Value::as_str) == Some("m.thread"))
        .then(|| {
            rel.get("event_id")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .flatten()
}

/// A thread message's `m.in_reply_to` is only the fallback for clients without threads.
fn is_fallback(content: &Value) -> bool {
    content
        .pointer("/m.relates_to/is_falling_back")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Addressed to the bot: an intentional mention, or its user id in the text.
fn mentioned(content: &Value, body: &str, me: &str) -> bool {
    let intentional = content
        .pointer("/m.mentions/user_ids")
        .and_then(Value::as_array)
        .is_some_and(|ids| ids.iter().any(|id| id.as_str() == Some(me)));
    intentional || body.contains(me)
}

/// The text without the bot's user id (a mention pill's plain form).
fn without_mention(text: &str, me: &str) -> String {
    let cut = text.replace(me, "");
    let cut = cut.trim();
    cut.trim_start_matches([':', ',']).trim().to_string()
}

/// The body without a rich reply's quoted fallback (`> <@x:hs> …` lines, then a blank line).
fn strip_reply_fallback(body: &str) -> String {
    if !body.starts_with("> ") {
        return body.to_string();
    }
    let rest: Vec<&str> = body.lines().skip_while(|l| l.starts_with('>')).collect();
    rest.join("\n").trim_start_matches('\n').to_string()
}

/// A file's caption: `body` when a separate `filename` names the file (Matrix 1.10), else none.
fn media_caption(content: &Value) -> String {
    let body = content.get("body").and_then(Value::as_str).unwrap_or("");
    match content.get("filename").and_then(Value::as_str) {
        Some(name) if name != body => body.to_string(),
        _ => String::new(),
    }
}

/// When the homeserver received the event.
fn event_time(event: &Value) -> DateTime<Utc> {
    event
        .get("origin_server_ts")
        .and_then(Value::as_i64)
        .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
        .unwrap_or_else(Utc::now)
}

/// The attachment a media event announces, its bytes fetched later (`media.rs`).
pub fn announced(content: &Value) -> Option<(MediaKind, String, Option<String>, Option<u64>)> {
    let kind = match content.get("msgtype").and_then(Value::as_str)? {
        "m.image" => MediaKind::Photo,
        "m.audio" => MediaKind::Audio,
        "m.video" => MediaKind::Video,
        _ => MediaKind::Document,
    };
    let name = content
        .get("filename")
        .or_else(|| content.get("body"))
        .and_then(Value::as_str)
        .unwrap_or("file")
        .to_string();
    let mime = content
        .pointer("/info/mimetype")
        .and_then(Value::as_str)
        .map(str::to_string);
    let size = content.pointer("/info/size").and_then(Value::as_u64);
    Some((kind, name, mime, size))
}

/// What an invite says of itself: who sent it, and whether the room is encrypted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invite {
    pub inviter: String,
    pub encrypted: bool,
    /// The inviter made it a direct chat (`is_direct` on the invite).
    pub direct: bool,
}

/// Reads an invite from its stripped state events (`invite_state` in `/sync`): the sender of
/// the bot's own `invite` membership, and whether an `m.room.encryption` event is there.
pub fn invite(invite_state: &[Value], me: &str) -> Option<Invite> {
    let str_at = |e: &Value, ptr: &str| e.pointer(ptr).and_then(Value::as_str).map(str::to_string);
    let (inviter, direct) = invite_state.iter().find_map(|e| {
        let mine = str_at(e, "/type").as_deref() == Some("m.room.member")
            && str_at(e, "/state_key").as_deref() == Some(me)
            && str_at(e, "/content/membership").as_deref() == Some("invite");
        let direct = e.pointer("/content/is_direct").and_then(Value::as_bool) == Some(true);
        mine.then(|| str_at(e, "/sender").map(|s| (s, direct)))
            .flatten()
    })?;
    let encrypted = invite_state
        .iter()
        .any(|e| str_at(e, "/type").as_deref() == Some("m.room.encryption"));
    Some(Invite {
        inviter,
        encrypted,
        direct,
    })
}
