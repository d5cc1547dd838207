//! Telegram update → `MessageEvent`, and the rule for which updates reach the core at all.
//!
//! One decision per update, the same for long polling and the webhook: ingest it (with the
//! text the model should see) or ignore it with a reason. Ignored, never ingested: edited
//! messages, service messages (joins, pins, topic changes), messages from bots (ours and
//! others'), channel posts, commands addressed to another bot, and group messages that do not
//! address this bot (unless the chat is free-response). Everything else is ingested; the core's
//! hooks then decide authorization and commands.
//!
//! Must not: do I/O, or leak a teloxide type past this file's functions.

use std::collections::HashSet;

use teloxide::types::{
    CallbackQuery, Me, Message, MessageEntity, MessageEntityKind, MessageEntityRef,
    MessageKind as TgKind, Update, UpdateKind,
};

use crate::delivery::parse_approval_button;
use crate::domain::{ChatType, MessageEvent, MessageKind, Origin, Platform};
use crate::lanes::Press;

/// Who the bot is (from `getMe`), needed to tell whether a group message addresses it.
#[derive(Debug, Clone)]
pub struct BotIdentity {
    pub id: u64,
    pub username: String,
}

impl From<&Me> for BotIdentity {
    fn from(me: &Me) -> Self {
        BotIdentity {
            id: me.user.id.0,
            username: me.user.username.clone().unwrap_or_default(),
        }
    }
}

/// What to do with one update.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Ingest(Box<MessageEvent>),
    /// An approval button was pressed; the query must be answered with the outcome.
    Press {
        press: Press,
        query_id: String,
    },
    /// Not for the core; the reason goes to the debug log.
    Ignore(&'static str),
}

pub struct Rules<'a> {
    pub me: &'a BotIdentity,
    pub free_response_chats: &'a HashSet<String>,
}

/// Decides what an update means for the core.
pub fn decide(update: &Update, rules: &Rules<'_>) -> Decision {
    let msg = match &update.kind {
        UpdateKind::Message(m) => m,
        UpdateKind::CallbackQuery(q) => return press(q),
        UpdateKind::EditedMessage(_) => return Decision::Ignore("edited message"),
        UpdateKind::ChannelPost(_) | UpdateKind::EditedChannelPost(_) => {
            return Decision::Ignore("channel post")
        }
        UpdateKind::Error(_) => return Decision::Ignore("update of an unknown shape"),
        _ => return Decision::Ignore("update kind not handled"),
    };
    let Some(from) = &msg.from else {
        return Decision::Ignore("message without a sender");
    };
    if from.is_bot {
        return Decision::Ignore("message from a bot");
    }
    // A dice roll is its own kind in teloxide, but a person's message all the same.
    if !matches!(msg.kind, TgKind::Common(_) | TgKind::Dice(_)) {
        return Decision::Ignore("service message");
    }
    let (raw_text, raw_entities) = match msg.text() {
        Some(t) => (t, msg.entities().unwrap_or_default()),
        None => (
            msg.caption().unwrap_or_default(),
            msg.caption_entities().unwrap_or_default(),
        ),
    };
    let checked = well_formed_entities(raw_text, raw_entities);
    let entities = MessageEntityRef::parse(raw_text, &checked);
    let command = leading_command(raw_text, &entities);
    if let Some((_, Some(target))) = &command {
        if !target.eq_ignore_ascii_case(&rules.me.username) {
            return Decision::Ignore("command addressed to another bot");
        }
    }
    let is_group = msg.chat.is_group() || msg.chat.is_supergroup();
    let chat_id = msg.chat.id.0.to_string();
    if is_group && !rules.free_response_chats.contains(&chat_id) {
        let addressed =
            command.is_some() || mentions_me(&entities, rules.me) || replies_to_me(msg, rules.me);
        if !addressed {
            return Decision::Ignore("group message not addressed to the bot");
        }
    }
    // A location, contact, poll or dice has no text or caption of its own: its line is the text.
    let text =
        super::media::shared_text(msg).unwrap_or_else(|| model_text(raw_text, &entities, rules.me));
    let attachments = super::media::attachments(msg);
    let kind = if command.is_some() {
        MessageKind::Command
    } else if text.trim().is_empty() && !attachments.is_empty() {
        MessageKind::Media
    } else {
        MessageKind::Text
    };
    let thread_id = msg
        .thread_id
        .filter(|_| msg.is_topic_message)
        .map(|t| t.0 .0.to_string());
    let chat_type = if msg.chat.is_private() {
        ChatType::Dm
    } else if thread_id.is_some() {
        ChatType::Thread
    } else {
        ChatType::Group
    };
    let mut ev = MessageEvent::text(
        Platform::named("telegram"),
        &chat_id,
        &from.id.0.to_string(),
        &text,
    );
    ev.chat_type = chat_type;
    ev.thread_id = thread_id;
    ev.sender_name = from.full_name();
    ev.platform_message_id = format!("{chat_id}:{}", msg.id.0);
    ev.update_id = Some(i64::from(update.id.0));
    ev.origin = Origin::person(kind);
    ev.reply_to = msg
        .reply_to_message()
        .map(|r| format!("{chat_id}:{}", r.id.0));
    ev.timestamp = msg.date;
    ev.attachments = attachments;
    Decision::Ingest(Box::new(ev))
}

/// The entities whose UTF-16 bounds both fall on character boundaries of `text`. Telegram only
/// sends such entities, but the update is outside input (a forged webhook call, a broken Bot
/// API server): teloxide's conversion to byte ranges asserts on an offset inside a surrogate
/// pair and leaves one past the end unconverted, so a later slice of the text panics. Found by
/// the `telegram_update` fuzz target.
fn well_formed_entities(text: &str, entities: &[MessageEntity]) -> Vec<MessageEntity> {
    let mut boundaries = Vec::with_capacity(text.len() + 1);
    let mut at = 0;
    for c in text.chars() {
        boundaries.push(at);
        at += c.len_utf16();
    }
    boundaries.push(at);
    entities
        .iter()
        .filter(|e| {
            e.offset.checked_add(e.length).is_some_and(|end| {
                boundaries.binary_search(&e.offset).is_ok()
                    && boundaries.binary_search(&end).is_ok()
            })
        })
        .cloned()
        .collect()
}

/// A bot command at offset 0: (command name, `@target` when present).
fn leading_command<'a>(
    text: &'a str,
    entities: &[MessageEntityRef<'a>],
) -> Option<(&'a str, Option<&'a str>)> {
    let first = entities
        .iter()
        .find(|e| e.start() == 0 && matches!(e.kind(), MessageEntityKind::BotCommand))
        .map(|e| e.text())
        .or_else(|| {
            // Some clients send bare commands without entities; accept the same shape.
            let word = text.split_whitespace().next()?;
            (text.starts_with('/') && word.len() > 1).then_some(word)
        })?;
    let body = first.strip_prefix('/')?;
    Some(match body.split_once('@') {
        Some((name, target)) => (name, Some(target)),
        None => (body, None),
    })
}

fn is_my_mention(e: &MessageEntityRef<'_>, me: &BotIdentity) -> bool {
    match e.kind() {
        MessageEntityKind::Mention => e
            .text()
            .strip_prefix('@')
            .is_some_and(|u| u.eq_ignore_ascii_case(&me.username)),
        MessageEntityKind::TextMention { user } => user.id.0 == me.id,
        _ => false,
    }
}

fn mentions_me(entities: &[MessageEntityRef<'_>], me: &BotIdentity) -> bool {
    entities.iter().any(|e| is_my_mention(e, me))
}

fn replies_to_me(msg: &Message, me: &BotIdentity) -> bool {
    msg.reply_to_message()
        .and_then(|r| r.from.as_ref())
        .is_some_and(|u| u.id.0 == me.id)
}

/// The text the model sees: `@bot_username` mentions removed, `/cmd@bot` shortened to `/cmd`.
/// A message that was nothing but the mention keeps its text, so it still reads as a greeting.
fn model_text(text: &str, entities: &[MessageEntityRef<'_>], me: &BotIdentity) -> String {
    let mut cuts: Vec<std::ops::Range<usize>> = entities
        .iter()
        .filter(|e| matches!(e.kind(), MessageEntityKind::Mention) && is_my_mention(e, me))
        .map(|e| e.range())
        .collect();
    if let Some(e) = entities
        .iter()
        .find(|e| e.start() == 0 && matches!(e.kind(), MessageEntityKind::BotCommand))
    {
        if let Some(at) = e.text().find('@') {
            cuts.push(at..e.end());
        }
    } else if text.starts_with('/') {
        let word_end = text.find(char::is_whitespace).unwrap_or(text.len());
        if let Some(at) = text[..word_end].find('@') {
            cuts.push(at..word_end);
        }
    }
    if cuts.is_empty() {
        return text.to_string();
    }
    cuts.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for r in cuts {
        if r.start >= pos {
            out.push_str(&text[pos..r.start]);
            pos = r.end;
        }
    }
    out.push_str(&text[pos..]);
    let cleaned = out.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>();
    let joined = cleaned.join(" ");
    let joined = joined.trim();
    if joined.is_empty() {
        text.trim().to_string()
    } else {
        joined.to_string()
    }
}

/// A button press: only ours (approval data) from a message in a chat; anything else is ignored.
fn press(q: &CallbackQuery) -> Decision {
    let Some((id, approve)) = q.data.as_deref().and_then(parse_approval_button) else {
        return Decision::Ignore("callback query that is not an approval button");
    };
    let Some(msg) = &q.message else {
        return Decision::Ignore("callback query without its message");
    };
    Decision::Press {
        press: Press {
            approval_id: id.to_string(),
            approve,
            platform: Platform::named("telegram"),
            chat_id: msg.chat().id.0.to_string(),
            sender_id: q.from.id.0.to_string(),
            sender_roles: Vec::new(),
        },
        query_id: q.id.0.clone(),
    }
}
