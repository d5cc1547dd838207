//! Slack event → `MessageEvent`, and the rule for which events reach the core at all.
//!
//! One decision per event, the same for Socket Mode and the Events API: ingest it (with the
//! lane, the text the model should see and the files to fetch later), record a button press, or
//! ignore it with a reason. Lanes: a DM (`channel_type: im`) is `slack:<channel>`; in a channel
//! Herald answers only when mentioned (or in a free-response channel, or with
//! `require_mention = false`), always in the message's thread, and each thread is its own lane
//! `slack:<channel>:<thread_ts>` (a top-level mention starts the thread at its own ts). Never
//! ingested: our own and other bots' messages, joins, topics and other housekeeping subtypes.
//! Edits and deletions are ingested as `Edited` / `Service` kinds, which never start a turn.
//!
//! The inbox dedupes on `<channel>/<ts>`: a message's `ts` is unique in its channel, Slack
//! sends the same ts in `message` and `app_mention` for one mention, and a redelivered
//! envelope (`retry_attempt` > 0, `X-Slack-Retry-Num`) carries it unchanged.
//!
//! Must not: do I/O, or leak a slack-morphism type past this file's functions.

use std::collections::HashSet;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use slack_morphism::events::{SlackEventCallbackBody, SlackMessageEvent, SlackMessageEventType};
use slack_morphism::{SlackFile, SlackMessageContent, SlackMessageSender};

use super::SLACK;
use crate::domain::{
    Attachment, ChatType, MediaKind, MediaSource, MessageEvent, MessageKind, Origin,
};
use crate::lanes::Press;

/// Who the bot is (from `auth.test`): its user id for mentions, its bot id for its own posts.
#[derive(Debug, Clone, Default)]
pub struct BotIdentity {
    pub user_id: String,
    pub bot_id: Option<String>,
}

pub struct Rules<'a> {
    pub me: &'a BotIdentity,
    pub require_mention: bool,
    pub free_response_channels: &'a HashSet<String>,
}

/// What to do with one event (or button press, or slash command: `interactions.rs`).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Ingest(Box<MessageEvent>),
    /// An approval button was pressed.
    Press(Press),
    /// Not for the core; the reason goes to the debug log.
    Ignore(&'static str),
}

/// Decides what an Events API callback's `event` means for the core.
pub fn decide_event(event: &Value, rules: &Rules<'_>) -> Result<Decision, serde_json::Error> {
    let body: SlackEventCallbackBody = serde_json::from_value(event.clone())?;
    Ok(match body {
        SlackEventCallbackBody::Message(m) => message(&m, event, rules, false),
        SlackEventCallbackBody::AppMention(m) => {
            let msg = SlackMessageEvent {
                origin: {
                    let mut o = m.origin.clone();
                    o.channel = Some(m.channel.clone());
                    o
                },
                content: Some(m.content.clone()),
                sender: SlackMessageSender {
                    user: Some(m.user.clone()),
                    bot_id: None,
                    username: None,
                    display_as_bot: None,
                    user_profile: None,
                    bot_profile: None,
                },
                subtype: None,
                hidden: None,
                message: None,
                previous_message: None,
                deleted_ts: None,
            };
            message(&msg, event, rules, true)
        }
        SlackEventCallbackBody::Unknown(_) if is_message_type(event) => {
            // A type we handle that did not read as that type: malformed, not merely unknown.
            return Err(serde::de::Error::custom(
                "a message event that does not read",
            ));
        }
        _ => Decision::Ignore("event type not handled"),
    })
}

fn is_message_type(event: &Value) -> bool {
    matches!(
        event.get("type").and_then(Value::as_str),
        Some("message" | "app_mention")
    )
}

fn message(
    m: &SlackMessageEvent,
    event_json: &Value,
    rules: &Rules<'_>,
    mentioned: bool,
) -> Decision {
    let Some(channel) = m.origin.channel.as_ref().map(|c| c.0.clone()) else {
        return Decision::Ignore("message without a channel");
    };
    let is_dm = m.origin.channel_type.as_ref().is_some_and(|t| t.0 == "im")
        || (m.origin.channel_type.is_none() && channel.starts_with('D'));
    match &m.subtype {
        None
        | Some(SlackMessageEventType::FileShare)
        | Some(SlackMessageEventType::ThreadBroadcast)
        | Some(SlackMessageEventType::MeMessage) => {}
        Some(SlackMessageEventType::MessageChanged) => return changed(m, &channel, is_dm, rules),
        Some(SlackMessageEventType::MessageDeleted) => return deleted(m, &channel, is_dm, rules),
        Some(SlackMessageEventType::BotMessage) => return Decision::Ignore("message from a bot"),
        Some(_) => return Decision::Ignore("housekeeping subtype"),
    }
    if from_a_bot(&m.sender, rules.me) {
        return Decision::Ignore("message from a bot");
    }
    let Some(user) = m.sender.user.as_ref().map(|u| u.0.clone()) else {
        return Decision::Ignore("message without a sender");
    };
    let content = m.content.clone().unwrap_or_else(empty_content);
    let raw = content.text.clone().unwrap_or_default();
    let addressed = mentioned || mentions(&raw, rules.me);
    if !is_dm && !addressed && !free(rules, &channel) {
        return Decision::Ignore("channel message not addressed to the bot");
    }
    let ts = m.origin.ts.0.clone();
    let text = model_text(&raw, rules.me);
    let files = attachments(content.files.as_deref().unwrap_or_default(), event_json);
    let kind = if text.trim_start().starts_with('/') {
        MessageKind::Command
    } else if text.trim().is_empty() && !files.is_empty() {
        MessageKind::Media
    } else {
        MessageKind::Text
    };
    let mut ev = MessageEvent::text(SLACK, &channel, &user, &text);
    if is_dm {
        ev.chat_type = ChatType::Dm;
    } else {
        // Always in a thread: the thread the message is in, or the one it starts.
        let thread = m
            .origin
            .thread_ts
            .as_ref()
            .map_or(ts.clone(), |t| t.0.clone());
        ev.chat_type = ChatType::Thread;
        ev.thread_id = Some(thread);
    }
    ev.sender_name = sender_name(&m.sender).unwrap_or_else(|| user.clone());
    ev.platform_message_id = message_key(&channel, &ts);
    ev.reply_to = Some(ts.clone());
    ev.timestamp = ts_time(&ts);
    ev.origin = Origin::person(kind);
    ev.attachments = files;
    Decision::Ingest(Box::new(ev))
}

/// An edit of a person's message: recorded as `Edited` in the lane it belongs to.
fn changed(m: &SlackMessageEvent, channel: &str, is_dm: bool, rules: &Rules<'_>) -> Decision {
    let Some(new) = &m.message else {
        return Decision::Ignore("message_changed without the message");
    };
    if from_a_bot(&new.sender, rules.me) {
        return Decision::Ignore("edit of a bot's message");
    }
    let Some(user) = new.sender.user.as_ref().map(|u| u.0.clone()) else {
        return Decision::Ignore("edit without a sender");
    };
    let raw = new
        .content
        .as_ref()
        .and_then(|c| c.text.clone())
        .unwrap_or_default();
    if !is_dm && !mentions(&raw, rules.me) && !free(rules, channel) {
        return Decision::Ignore("edit of a channel message not addressed to the bot");
    }
    let thread = m.origin.thread_ts.clone().map(|t| t.0).or_else(|| {
        // The edited message's thread, or the thread it started.
        (!is_dm).then(|| new.ts.0.clone())
    });
    record(
        channel,
        is_dm,
        thread,
        &user,
        &model_text(&raw, rules.me),
        &m.origin.ts.0,
        Some(new.ts.0.clone()),
        MessageKind::Edited,
    )
}

/// A deleted person's message: recorded as a `Service` line in the lane it belonged to.
fn deleted(m: &SlackMessageEvent, channel: &str, is_dm: bool, rules: &Rules<'_>) -> Decision {
    let Some(old) = &m.previous_message else {
        return Decision::Ignore("message_deleted without the previous message");
    };
    if from_a_bot(&old.sender, rules.me) {
        return Decision::Ignore("deletion of a bot's message");
    }
    let raw = old
        .content
        .as_ref()
        .and_then(|c| c.text.clone())
        .unwrap_or_default();
    if !is_dm && !mentions(&raw, rules.me) && !free(rules, channel) {
        return Decision::Ignore("deletion of a channel message not addressed to the bot");
    }
    let user = old.sender.user.as_ref().map_or("", |u| u.0.as_str());
    let thread = m
        .origin
        .thread_ts
        .clone()
        .map(|t| t.0)
        .or_else(|| (!is_dm).then(|| old.ts.0.clone()));
    record(
        channel,
        is_dm,
        thread,
        user,
        "(deleted a message)",
        &m.origin.ts.0,
        Some(old.ts.0.clone()),
        MessageKind::Service,
    )
}

#[allow(clippy::too_many_arguments)]
fn record(
    channel: &str,
    is_dm: bool,
    thread: Option<String>,
    user: &str,
    text: &str,
    event_ts: &str,
    about: Option<String>,
    kind: MessageKind,
) -> Decision {
    let mut ev = MessageEvent::text(SLACK, channel, user, text);
    ev.chat_type = if is_dm {
        ChatType::Dm
    } else {
        ChatType::Thread
    };
    ev.thread_id = if is_dm { None } else { thread };
    // The change has its own ts: it must not dedupe against the message it changes.
    ev.platform_message_id = message_key(channel, event_ts);
    ev.reply_to = about;
    ev.timestamp = ts_time(event_ts);
    ev.origin = Origin::person(kind);
    Decision::Ingest(Box::new(ev))
}

/// The inbox key of a message: `<channel>/<ts>`.
pub fn message_key(channel: &str, ts: &str) -> String {
    format!("{channel}/{ts}")
}

fn free(rules: &Rules<'_>, channel: &str) -> bool {
    !rules.require_mention || rules.free_response_channels.contains(channel)
}

fn from_a_bot(sender: &SlackMessageSender, me: &BotIdentity) -> bool {
    sender.bot_id.is_some()
        || sender.bot_profile.is_some()
        || sender.user.as_ref().is_some_and(|u| u.0 == me.user_id)
}

fn mentions(text: &str, me: &BotIdentity) -> bool {
    !me.user_id.is_empty() && text.contains(&format!("<@{}", me.user_id))
}

fn sender_name(sender: &SlackMessageSender) -> Option<String> {
    let p = sender.user_profile.as_ref()?;
    [&p.display_name, &p.real_name]
        .into_iter()
        .flatten()
        .find(|n| !n.trim().is_empty())
        .cloned()
}

/// The text the model sees: our mention removed, Slack's escapes undone. A message that was
/// nothing but the mention keeps it, so it still reads as a greeting.
pub fn model_text(raw: &str, me: &BotIdentity) -> String {
    let mut text = raw.to_string();
    if !me.user_id.is_empty() {
        let open = format!("<@{}", me.user_id);
        while let Some(start) = text.find(&open) {
            let Some(len) = text[start..].find('>') else {
                break;
            };
            text.replace_range(start..start + len + 1, "");
        }
    }
    let cleaned = text
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let cleaned = cleaned.trim();
    let out = if cleaned.is_empty() {
        raw.trim()
    } else {
        cleaned
    };
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The files of a message, fetched later by the media path with the bot token
/// (`MediaSource::Authorized`, only from the hosts `SPEC.files` names). slack-morphism's
/// `SlackFile` has no `size`: it is read from the raw event (`files[i].size`, by id), so a file
/// over `media.max_bytes` is refused by its announced size without a download.
fn attachments(files: &[SlackFile], raw: &Value) -> Vec<Attachment> {
    let sizes = raw.get("files").and_then(Value::as_array);
    files
        .iter()
        .filter_map(|f| {
            let url = f.url_private_download.as_ref().or(f.url_private.as_ref())?;
            let mime = f.mimetype.as_ref().map(|m| m.0.clone());
            let kind = mime
                .as_deref()
                .map_or(MediaKind::Document, MediaKind::from_mime);
            let source = MediaSource::Authorized {
                platform: SLACK,
                url: url.to_string(),
            };
            let mut a = Attachment::new(kind, source);
            a.name = f.name.clone().or_else(|| f.title.clone());
            a.mime = mime;
            a.size = sizes
                .into_iter()
                .flatten()
                .find(|r| r.get("id").and_then(Value::as_str) == Some(f.id.0.as_str()))
                .and_then(|r| r.get("size"))
                .and_then(Value::as_u64);
            Some(a)
        })
        .collect()
}

fn empty_content() -> SlackMessageContent {
    SlackMessageContent {
        text: None,
        markdown_text: None,
        blocks: None,
        attachments: None,
        upload: None,
        files: None,
        reactions: None,
        metadata: None,
    }
}

/// A message ts (`"1700000000.000100"`, seconds and micro-ordinal) as a time.
pub fn ts_time(ts: &str) -> DateTime<Utc> {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, "0"));
    let secs = secs.parse::<i64>().unwrap_or(0);
    let micros = frac.get(..6).unwrap_or(frac).parse::<u32>().unwrap_or(0);
    Utc.timestamp_opt(secs, micros.saturating_mul(1000))
        .single()
        .unwrap_or_else(Utc::now)
}
