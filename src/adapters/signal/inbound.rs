//! One signal-cli envelope → what it means for the core: a message to ingest (with the files
//! to fetch), a reaction (which may answer an approval question), a message Herald cannot
//! read yet, or nothing for the core (receipts, typing, sync and call messages, group updates,
//! our own messages, a group message not addressed to the bot).
//!
//! Lanes: a direct chat is `signal:<number without +>` or `signal:<uuid>` (`ids.rs`); a group is
//! `signal:group:<id>`, answered when the bot is mentioned (Signal's mentions: U+FFFC in the
//! text and a `mentions` entry naming the bot's number or uuid), when a message quotes the
//! bot, or always in a `free_response_groups` group. The inbox dedupes on
//! `<author>/<timestamp>`, so an envelope seen again after a reconnect is harmless.
//!
//! Must not: do I/O, or let signal-cli's JSON shapes past this file.

use std::collections::HashSet;

use chrono::{TimeZone, Utc};
use serde::Deserialize;
use serde_json::Value;

use super::ids::{dm_chat, group_chat, message_key};
use super::SIGNAL;
use crate::domain::{ChatType, MessageEvent, MessageKind, Origin};

/// The mention placeholder Signal puts in a message's text.
const MENTION: char = '\u{FFFC}';

#[derive(Debug, Deserialize)]
struct Received {
    envelope: Option<Envelope>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    source_number: Option<String>,
    source_uuid: Option<String>,
    source_name: Option<String>,
    timestamp: u64,
    data_message: Option<DataMessage>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DataMessage {
    message: Option<String>,
    group_info: Option<GroupInfo>,
    #[serde(default)]
    mentions: Option<Vec<Mention>>,
    #[serde(default)]
    attachments: Option<Vec<FileJson>>,
    quote: Option<Quote>,
    reaction: Option<Reaction>,
    remote_delete: Option<Value>,
    is_expiration_update: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupInfo {
    group_id: String,
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Mention {
    number: Option<String>,
    uuid: Option<String>,
    name: Option<String>,
    start: usize,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileJson {
    id: Option<String>,
    content_type: Option<String>,
    filename: Option<String>,
    size: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Quote {
    id: u64,
    author_number: Option<String>,
    author_uuid: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reaction {
    emoji: String,
    target_author_number: Option<String>,
    target_author_uuid: Option<String>,
    target_sent_timestamp: u64,
    #[serde(default)]
    is_remove: bool,
}

/// Who the bot is and where it answers.
pub struct Rules<'a> {
    /// The bot's number (`signal.account`).
    pub account: &'a str,
    /// The bot's account uuid, when known (mentions may name only it).
    pub uuid: Option<&'a str>,
    /// signal-cli's ids of the groups where every message is answered.
    pub free_response_groups: &'a HashSet<String>,
    /// The allowlist: a sender listed by uuid is known by their uuid.
    pub allowed: &'a HashSet<String>,
}

/// A file of a message, fetched with `getAttachment` before the event is ingested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRef {
    pub id: String,
    pub mime: Option<String>,
    pub name: Option<String>,
    pub size: Option<u64>,
}

/// A message for the core.
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    pub event: MessageEvent,
    pub files: Vec<FileRef>,
    /// Where `getAttachment` looks: the sender's address, or the group (signal-cli's id).
    pub source: (&'static str, String),
    /// The timestamp of the message it quotes (an approval question it answers, perhaps).
    pub quotes: Option<String>,
}

/// A reaction: never a message for the agent, but it may answer a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reacted {
    pub chat_id: String,
    pub sender_id: String,
    pub emoji: String,
    /// The timestamp of the message reacted to.
    pub target: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Ingest(Box<Inbound>),
    React(Reacted),
    /// A message of a kind Herald cannot read (a sticker, a contact, a poll, a payment…), from
    /// someone who addressed the bot: they are told so, and it is recorded by its key.
    Unreadable(Box<MessageEvent>),
    /// Not for the core; the reason goes to the debug log.
    Ignore(&'static str),
}

/// Decides what one `receive` event's data means; `Err` when it does not read.
pub fn decide(data: &Value, rules: &Rules<'_>) -> Result<Decision, serde_json::Error> {
    let received: Received = serde_json::from_value(data.clone())?;
    let Some(env) = received.envelope else {
        return Ok(Decision::Ignore("an event without an envelope"));
    };
    let Some(dm) = &env.data_message else {
        return Ok(Decision::Ignore(
            "not a data message (receipt, typing, sync, call, story or edit)",
        ));
    };
    let Some(author) = env.source_uuid.clone().or(env.source_number.clone()) else {
        return Ok(Decision::Ignore("a message without a sender"));
    };
    if env.source_number.as_deref() == Some(rules.account)
        || (rules.uuid.is_some() && env.source_uuid.as_deref() == rules.uuid)
    {
        return Ok(Decision::Ignore("our own message"));
    }
    let sender_id = match (&env.source_number, &env.source_uuid) {
        (_, Some(u)) if rules.allowed.contains(u) => u.clone(),
        (Some(n), _) => n.clone(),
        (None, Some(u)) => u.clone(),
        (None, None) => unreachable!("an author was found above"),
    };
    let group = dm.group_info.as_ref();
    if group.is_some_and(|g| g.kind.as_deref() == Some("UPDATE")) {
        return Ok(Decision::Ignore("a group update"));
    }
    if dm.remote_delete.is_some() || dm.is_expiration_update == Some(true) {
        return Ok(Decision::Ignore("a deletion or a timer change"));
    }
    let chat_id = group.map_or_else(|| dm_chat(&sender_id), |g| group_chat(&g.group_id));
    if let Some(r) = &dm.reaction {
        if r.is_remove || !is_bot(rules, &r.target_author_number, &r.target_author_uuid) {
            return Ok(Decision::Ignore("a reaction not to the bot's message"));
        }
        return Ok(Decision::React(Reacted {
            chat_id,
            sender_id,
            emoji: r.emoji.clone(),
            target: r.target_sent_timestamp.to_string(),
        }));
    }
    let mentions = dm.mentions.as_deref().unwrap_or_default();
    let addressed = match group {
        None => true,
        Some(g) => {
            rules.free_response_groups.contains(&g.group_id)
                || mentions.iter().any(|m| is_bot(rules, &m.number, &m.uuid))
                || dm
                    .quote
                    .as_ref()
                    .is_some_and(|q| is_bot(rules, &q.author_number, &q.author_uuid))
        }
    };
    if !addressed {
        return Ok(Decision::Ignore("a group message not addressed to the bot"));
    }
    let from = Sender {
        author,
        sender_id,
        chat_id,
    };
    Ok(message(&env, dm, from, rules))
}

/// Who wrote an addressed message, and where.
struct Sender {
    /// The uuid (or number) that, with the timestamp, names the message.
    author: String,
    sender_id: String,
    chat_id: String,
}

/// An addressed data message → the event to ingest, or the refusal of what cannot be read.
fn message(env: &Envelope, dm: &DataMessage, from: Sender, rules: &Rules<'_>) -> Decision {
    let Sender {
        author,
        sender_id,
        chat_id,
    } = from;
    let group = dm.group_info.as_ref();
    let mentions = dm.mentions.as_deref().unwrap_or_default();
    let raw = dm.message.clone().unwrap_or_default();
    let text = model_text(&raw, mentions, rules);
    let files: Vec<FileRef> = dm
        .attachments
        .iter()
        .flatten()
        .filter_map(|f| {
            Some(FileRef {
                id: f.id.clone()?,
                mime: f.content_type.clone(),
                name: f.filename.clone(),
                size: f.size,
            })
        })
        .collect();
    let mut ev = MessageEvent::new(
        SIGNAL,
        &chat_id,
        &sender_id,
        &text,
        Origin::person(MessageKind::Text),
        message_key(&author, env.timestamp),
        Utc.timestamp_millis_opt(env.timestamp as i64)
            .single()
            .unwrap_or_else(Utc::now),
    );
    ev.chat_type = if group.is_some() {
        ChatType::Group
    } else {
        ChatType::Dm
    };
    ev.sender_name = env
        .source_name
        .clone()
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| sender_id.clone());
    if text.trim().is_empty() && files.is_empty() {
        ev.text = "[a message Herald cannot read yet]".into();
        ev.origin = Origin::person(MessageKind::Service);
        return Decision::Unreadable(Box::new(ev));
    }
    let kind = if text.trim_start().starts_with('/') {
        MessageKind::Command
    } else if text.trim().is_empty() {
        MessageKind::Media
    } else {
        MessageKind::Text
    };
    ev.origin = Origin::person(kind);
    let source = match group {
        Some(g) => ("groupId", g.group_id.clone()),
        None => ("recipient", env.source_number.clone().unwrap_or(author)),
    };
    Decision::Ingest(Box::new(Inbound {
        event: ev,
        files,
        source,
        quotes: dm.quote.as_ref().map(|q| q.id.to_string()),
    }))
}

fn is_bot(rules: &Rules<'_>, number: &Option<String>, uuid: &Option<String>) -> bool {
    number.as_deref() == Some(rules.account)
        || (rules.uuid.is_some() && uuid.as_deref() == rules.uuid)
}

/// The text the model sees: the bot's mentions taken out, other people's written as `@name`.
/// A message that was nothing but the bot's mention reads as a greeting (`@bot`).
fn model_text(raw: &str, mentions: &[Mention], rules: &Rules<'_>) -> String {
    let mut sorted: Vec<&Mention> = mentions.iter().collect();
    sorted.sort_by_key(|m| m.start);
    let mut who = sorted.into_iter();
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        if c != MENTION {
            out.push(c);
            continue;
        }
        match who.next() {
            Some(m) if is_bot(rules, &m.number, &m.uuid) => {}
            Some(m) => {
                let name = m.name.clone().or(m.number.clone()).or(m.uuid.clone());
                out.push('@');
                out.push_str(&name.unwrap_or_default());
            }
            None => {}
        }
    }
    let cleaned = out.trim().to_string();
    if cleaned.is_empty() && raw.contains(MENTION) {
        return "@bot".into();
    }
    cleaned
}
