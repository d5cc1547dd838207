//! `MessageEvent`: what every adapter turns a platform update into.
//!
//! This is the only shape the core sees. Platform types (teloxide, serenity, axum requests)
//! never cross this line; adapters translate at the edge. Serializable because the event is
//! stored verbatim in the inbox and replayed after a crash.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::cron::{deserialize_targets, Target};
use super::{Attachment, LaneKey, Person, Platform, SessionId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatType {
    Dm,
    Group,
    Channel,
    Thread,
}

/// What the person sent. `Text`, `Command` and `Media` (files, with or without a caption) can
/// start a turn; an edit or a service message is recorded only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MessageKind {
    Text,
    Command,
    Media,
    Edited,
    Service,
}

/// Work that must happen under a lane's turn lease but comes from outside the lane's worker
/// (a handoff build, a cron delivery). It travels through the lane's inbox like any event, so
/// it waits for an in-flight turn and is written under the lease, exactly once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Control {
    /// Close the lane's session if it is still this one.
    RotateSession {
        session_id: SessionId,
        reason: String,
    },
    /// Append a message that was delivered to this chat (a cron brief) to its transcript, so
    /// the agent knows what it sent when the person answers.
    Mirror { label: String, text: String },
    /// Append a message the agent of another conversation (`from`, a lane) sent into this
    /// chat with `send_message`, so this conversation's agent knows what was said here.
    Relayed { from: String, text: String },
    /// Queue a notice to the chat (a handoff build that went wrong), written under the lane's
    /// lease like every other write; `key` makes the outbox row idempotent.
    Notice { key: String, text: String },
}

/// Who or what an event comes from, and what that allows. A person's message may carry a
/// command; a scheduled run never does and may deliver elsewhere; a control event is an
/// instruction to the lane's worker that nobody typed. The variants make the combinations that
/// make no sense (a control event with a delivery list, a typed command that is internal)
/// impossible to write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Person {
        kind: MessageKind,
        /// The web chat's caller came from this machine (it passed the loopback check).
        #[serde(default)]
        from_loopback: bool,
    },
    /// A cron fire: its prompt runs as a turn in the job's lane.
    Scheduled {
        /// Deliver the reply to these targets (`telegram:<chat>[:<thread>]`, `web:<name>`, …)
        /// instead of the originating chat. Parsed once, where the event is made; stored as
        /// the targets' string form.
        #[serde(default, deserialize_with = "deserialize_targets")]
        deliver_to: Vec<Target>,
    },
    Control(Control),
}

impl Origin {
    /// A person's message of this kind, not from the loopback web chat.
    pub fn person(kind: MessageKind) -> Origin {
        Origin::Person {
            kind,
            from_loopback: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "super::stored_event::StoredEvent")]
pub struct MessageEvent {
    pub platform: Platform,
    pub chat_id: String,
    pub chat_type: ChatType,
    pub thread_id: Option<String>,
    pub sender_id: String,
    pub sender_name: String,
    /// The platform's id for this message; with `platform` it is the inbox dedup key.
    pub platform_message_id: String,
    /// Telegram's update id, when there is one (stored for diagnostics).
    pub update_id: Option<i64>,
    pub text: String,
    pub reply_to: Option<String>,
    pub timestamp: DateTime<Utc>,
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    /// The sender's role ids where the platform has roles (Discord guild members); checked
    /// against a role allowlist by the auth hook.
    #[serde(default)]
    pub sender_roles: Vec<String>,
    pub origin: Origin,
    /// The message whole, as the person wrote it, when `text` is only what the model should
    /// read of it (an email without its quoted history and signature). Kept with the stored
    /// event; never shown to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_text: Option<String>,
}

impl MessageEvent {
    /// An event with the given origin and the fields every test and adapter needs; the rest
    /// defaulted. The caller stamps it (`timestamp`, `platform_message_id`): the domain reads
    /// no clock and draws no random ids.
    pub fn new(
        platform: Platform,
        chat_id: &str,
        sender_id: &str,
        text: &str,
        origin: Origin,
        platform_message_id: String,
        timestamp: DateTime<Utc>,
    ) -> MessageEvent {
        MessageEvent {
            platform,
            chat_id: chat_id.to_string(),
            chat_type: ChatType::Dm,
            thread_id: None,
            sender_id: sender_id.to_string(),
            sender_name: sender_id.to_string(),
            platform_message_id,
            update_id: None,
            text: text.to_string(),
            reply_to: None,
            timestamp,
            attachments: Vec::new(),
            sender_roles: Vec::new(),
            origin,
            full_text: None,
        }
    }

    pub fn lane(&self) -> LaneKey {
        LaneKey::from_parts(
            self.platform.as_str(),
            &self.chat_id,
            self.thread_id.as_deref(),
        )
    }

    /// Who sent it, on its platform (`telegram:42`).
    pub fn person(&self) -> Person {
        Person::new(self.platform, &*self.sender_id)
    }

    /// True for events nobody typed (cron fires, control events): they never run commands
    /// and pass the authorization hook.
    pub fn is_internal(&self) -> bool {
        !matches!(self.origin, Origin::Person { .. })
    }

    /// What the person sent; `None` for events nobody typed.
    pub fn kind(&self) -> Option<MessageKind> {
        match self.origin {
            Origin::Person { kind, .. } => Some(kind),
            _ => None,
        }
    }

    /// A person's message of this kind.
    pub fn is_person(&self, kinds: &[MessageKind]) -> bool {
        matches!(&self.origin, Origin::Person { kind, .. } if kinds.contains(kind))
    }

    /// Where a scheduled run's reply goes; empty means the originating chat.
    pub fn deliver_to(&self) -> &[Target] {
        match &self.origin {
            Origin::Scheduled { deliver_to } => deliver_to,
            _ => &[],
        }
    }

    /// The web chat's caller came from this machine.
    pub fn from_loopback(&self) -> bool {
        matches!(
            self.origin,
            Origin::Person {
                from_loopback: true,
                ..
            }
        )
    }

    /// Whether this event may start a model turn at all.
    pub fn can_start_turn(&self) -> bool {
        match &self.origin {
            Origin::Person { kind, .. } => matches!(
                kind,
                MessageKind::Text | MessageKind::Command | MessageKind::Media
            ),
            Origin::Scheduled { .. } => true,
            Origin::Control(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{MediaKind, MediaSource};

    #[test]
    fn event_round_trips_through_json() {
        let mut ev = MessageEvent::text(Platform::named("telegram"), "-100", "42", "hello");
        ev.thread_id = Some("7".into());
        ev.chat_type = ChatType::Thread;
        ev.attachments.push(Attachment::new(
            MediaKind::Photo,
            MediaSource::Telegram("AgAD".into()),
        ));
        let json = serde_json::to_string(&ev).unwrap();
        let back: MessageEvent = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ev);
        assert_eq!(back.lane().as_str(), "telegram:-100:7");
    }

    #[test]
    fn event_table() {
        // (platform, chat, thread, kind, lane, can_start_turn)
        let cases = [
            (
                Platform::WEB,
                "alice",
                None,
                MessageKind::Text,
                "web:alice",
                true,
            ),
            (
                Platform::named("telegram"),
                "5",
                Some("9"),
                MessageKind::Command,
                "telegram:5:9",
                true,
            ),
            (
                Platform::named("discord"),
                "77",
                None,
                MessageKind::Media,
                "discord:77",
                true,
            ),
            (
                Platform::named("telegram"),
                "5",
                None,
                MessageKind::Edited,
                "telegram:5",
                false,
            ),
            (
                Platform::named("telegram"),
                "5",
                None,
                MessageKind::Service,
                "telegram:5",
                false,
            ),
        ];
        for (platform, chat, thread, kind, lane, starts) in cases {
            let mut ev = MessageEvent::text(platform, chat, "u", "x");
            ev.thread_id = thread.map(str::to_string);
            ev.origin = Origin::person(kind);
            assert_eq!(ev.lane().as_str(), lane);
            assert_eq!(ev.can_start_turn(), starts, "{kind:?}");
        }
    }
}
