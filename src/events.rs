//! Making new events: the stamp (the time and a fresh id) that the domain leaves to its
//! callers, so `domain/` reads no clock and draws no random number.

use chrono::Utc;

use crate::domain::{Control, MessageEvent, MessageKind, Origin, Platform};

impl MessageEvent {
    /// A person's plain text message, stamped now with a fresh id; the rest defaulted.
    pub fn text(platform: Platform, chat_id: &str, sender_id: &str, text: &str) -> MessageEvent {
        MessageEvent::new(
            platform,
            chat_id,
            sender_id,
            text,
            Origin::person(MessageKind::Text),
            uuid::Uuid::new_v4().to_string(),
            Utc::now(),
        )
    }

    /// A control event for the lane `platform:chat_id[:thread_id]`. `key` makes it
    /// idempotent: the same key is written to the inbox once.
    pub fn control(
        platform: Platform,
        chat_id: &str,
        thread_id: Option<&str>,
        key: &str,
        control: Control,
    ) -> MessageEvent {
        let mut ev = MessageEvent::new(
            platform,
            chat_id,
            "herald",
            "",
            Origin::Control(control),
            format!("control:{key}"),
            Utc::now(),
        );
        ev.thread_id = thread_id.map(str::to_string);
        ev
    }
}
