//! Discord messages in: which ones the agent hears, and how each becomes a `MessageEvent`.
//!
//! The rules live here as plain functions over serenity's `Message` so they can be table
//! tested without a gateway. This file must not authorize senders (the core's auth hook does,
//! from `sender_id` and `sender_roles`) and must not write anything: storing is the handler's
//! call to `LaneRouter::ingest`.

use std::collections::HashSet;
use std::time::Duration;

use serenity::all::{ChannelId, Message, MessageType, UserId};

use crate::config::DiscordConfig;
use crate::domain::{
    Attachment, ChatType, MediaKind, MediaSource, MessageEvent, MessageKind, Origin, Platform,
};
use crate::lanes::Ingest;
use crate::tasks::Backoff;

/// What kind of place a channel id is. A thread is its own lane under its parent channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Dm,
    Channel,
    Thread { parent: ChannelId },
}

/// The guild-channel answering rule, from config.
#[derive(Debug, Clone, Default)]
pub(super) struct Gate {
    pub require_mention: bool,
    pub free_response: HashSet<String>,
}

impl Gate {
    pub fn from_config(c: &DiscordConfig) -> Gate {
        Gate {
            require_mention: c.require_mention,
            free_response: c.free_response_channels.iter().cloned().collect(),
        }
    }

    /// Whether a message in `place` is addressed to the agent. DMs always are; in a guild, a
    /// mention, a reply to the bot, or a free-response channel (a thread inherits its parent's).
    fn addressed(&self, msg: &Message, place: Place, bot: UserId) -> bool {
        let channel = msg.channel_id.get().to_string();
        let free = |id: &str| self.free_response.contains(id);
        match place {
            Place::Dm => true,
            Place::Channel if free(&channel) => true,
            Place::Thread { parent } if free(&channel) || free(&parent.get().to_string()) => true,
            _ => {
                !self.require_mention
                    || msg.mentions_user_id(bot)
                    || msg
                        .referenced_message
                        .as_ref()
                        .is_some_and(|r| r.author.id == bot)
            }
        }
    }
}

/// Removes `<@bot>` / `<@!bot>` so the model and the command parser see what the person said.
pub(super) fn strip_mention(text: &str, bot: UserId) -> String {
    let id = bot.get();
    text.replace(&format!("<@{id}>"), "")
        .replace(&format!("<@!{id}>"), "")
        .trim()
        .to_string()
}

/// The event for `msg`, or `None` when the agent must not hear it: bots (ourselves included),
/// webhooks, system messages, unaddressed guild chatter, and empty messages.
pub(super) fn translate(
    msg: &Message,
    place: Place,
    bot: UserId,
    gate: &Gate,
) -> Option<MessageEvent> {
    if msg.author.bot || msg.author.id == bot || msg.webhook_id.is_some() {
        return None;
    }
    if !matches!(msg.kind, MessageType::Regular | MessageType::InlineReply) {
        return None;
    }
    if !gate.addressed(msg, place, bot) {
        return None;
    }
    let text = strip_mention(&msg.content, bot);
    let attachments: Vec<Attachment> = msg
        .attachments
        .iter()
        .map(|a| {
            let mime = a
                .content_type
                .clone()
                .unwrap_or_else(|| "application/octet-stream".into());
            let mut out =
                Attachment::new(MediaKind::from_mime(&mime), MediaSource::Url(a.url.clone()));
            out.mime = Some(mime);
            out.size = Some(u64::from(a.size));
            out.name = Some(a.filename.clone());
            out.duration_secs = a.duration_secs.map(|d| d as u32);
            out
        })
        .chain(msg.sticker_items.iter().map(|st| {
            let mut out = Attachment::new(
                MediaKind::Sticker,
                MediaSource::DiscordSticker(st.id.get().to_string()),
            );
            out.name = Some(st.name.clone());
            out
        }))
        .collect();
    if text.is_empty() && attachments.is_empty() {
        return None;
    }
    let kind = if text.starts_with('/') {
        MessageKind::Command
    } else if text.is_empty() {
        MessageKind::Media
    } else {
        MessageKind::Text
    };
    let (chat_id, chat_type, thread_id) = match place {
        Place::Dm => (msg.channel_id, ChatType::Dm, None),
        Place::Channel => (msg.channel_id, ChatType::Group, None),
        Place::Thread { parent } => (parent, ChatType::Thread, Some(msg.channel_id)),
    };
    let sender_name = msg
        .member
        .as_ref()
        .and_then(|m| m.nick.clone())
        .unwrap_or_else(|| msg.author.display_name().to_string());
    // Built from the shared constructor so fields the core adds later get their defaults.
    let mut ev = MessageEvent::text(
        Platform::named("discord"),
        &chat_id.get().to_string(),
        &msg.author.id.get().to_string(),
        &text,
    );
    ev.chat_type = chat_type;
    ev.thread_id = thread_id.map(|t| t.get().to_string());
    ev.sender_name = sender_name;
    ev.platform_message_id = msg.id.get().to_string();
    ev.origin = Origin::person(kind);
    ev.reply_to = msg
        .message_reference
        .as_ref()
        .and_then(|r| r.message_id)
        .map(|m| m.get().to_string());
    ev.timestamp = *msg.timestamp;
    ev.attachments = attachments;
    ev.sender_roles = msg
        .member
        .as_ref()
        .map(|m| m.roles.iter().map(|r| r.get().to_string()).collect())
        .unwrap_or_default();
    Some(ev)
}

const INGEST_ATTEMPTS: u32 = 6;

/// Stores the event, retrying through a brief store outage. Discord never redelivers a
/// gateway event, so a final failure is a lost message and is logged as one.
pub(super) async fn ingest_with_retry(ingest: &Ingest, ev: &MessageEvent) -> bool {
    let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
    for attempt in 1..=INGEST_ATTEMPTS {
        match ingest.ingest(ev).await {
            Ok(_) => return true,
            Err(e) if attempt < INGEST_ATTEMPTS => {
                tracing::warn!(error = %e, attempt, message_id = %ev.platform_message_id,
                    "could not store a Discord message; retrying");
                backoff.pause().await;
            }
            Err(e) => {
                metrics::counter!("herald_inbound_lost_total", "platform" => "discord")
                    .increment(1);
                tracing::error!(error = %e, lane = %ev.lane(), message_id = %ev.platform_message_id,
                    "Discord message LOST: not stored after {INGEST_ATTEMPTS} attempts, and Discord does not redeliver");
            }
        }
    }
    false
}

#[cfg(test)]
#[path = "inbound_tests.rs"]
mod tests;
