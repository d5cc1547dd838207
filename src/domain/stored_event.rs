//! The inbox's stored form of a `MessageEvent`. Today's rows carry `origin`; rows written
//! before it carry the old flags (`internal`, `kind`, `control`, `deliver_to`,
//! `from_loopback`), which still decode: each legal combination maps to its variant.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::cron::{deserialize_targets, Target};
use super::{Attachment, ChatType, Control, MessageEvent, MessageKind, Origin, Platform};

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum LegacyKind {
    Text,
    Command,
    Media,
    Edited,
    Service,
    Control,
}

#[derive(Deserialize)]
pub(super) struct StoredEvent {
    platform: Platform,
    chat_id: String,
    chat_type: ChatType,
    thread_id: Option<String>,
    sender_id: String,
    sender_name: String,
    platform_message_id: String,
    update_id: Option<i64>,
    text: String,
    reply_to: Option<String>,
    timestamp: DateTime<Utc>,
    #[serde(default)]
    attachments: Vec<Attachment>,
    #[serde(default)]
    sender_roles: Vec<String>,
    #[serde(default)]
    origin: Option<Origin>,
    // The flags of rows written before `origin`.
    #[serde(default)]
    kind: Option<LegacyKind>,
    #[serde(default)]
    internal: bool,
    #[serde(default)]
    from_loopback: bool,
    #[serde(default)]
    control: Option<Control>,
    #[serde(default, deserialize_with = "deserialize_targets")]
    deliver_to: Vec<Target>,
    #[serde(default)]
    full_text: Option<String>,
}

impl StoredEvent {
    fn legacy_origin(&mut self) -> Origin {
        if let Some(control) = self.control.take() {
            if self.internal || self.kind == Some(LegacyKind::Control) {
                return Origin::Control(control);
            }
        }
        if self.internal && self.kind != Some(LegacyKind::Control) {
            return Origin::Scheduled {
                deliver_to: std::mem::take(&mut self.deliver_to),
            };
        }
        let kind = match self.kind {
            Some(LegacyKind::Text) | None => MessageKind::Text,
            Some(LegacyKind::Command) => MessageKind::Command,
            Some(LegacyKind::Media) => MessageKind::Media,
            Some(LegacyKind::Edited) => MessageKind::Edited,
            // A control kind without its instruction is nothing to act on.
            Some(LegacyKind::Service) | Some(LegacyKind::Control) => MessageKind::Service,
        };
        Origin::Person {
            kind,
            from_loopback: self.from_loopback,
        }
    }
}

impl From<StoredEvent> for MessageEvent {
    fn from(mut w: StoredEvent) -> MessageEvent {
        let origin = match w.origin.take() {
            Some(o) => o,
            None => w.legacy_origin(),
        };
        MessageEvent {
            platform: w.platform,
            chat_id: w.chat_id,
            chat_type: w.chat_type,
            thread_id: w.thread_id,
            sender_id: w.sender_id,
            sender_name: w.sender_name,
            platform_message_id: w.platform_message_id,
            update_id: w.update_id,
            text: w.text,
            reply_to: w.reply_to,
            timestamp: w.timestamp,
            attachments: w.attachments,
            sender_roles: w.sender_roles,
            origin,
            full_text: w.full_text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows written before `origin` carried flags; each legal combination decodes to its
    /// variant, and today's form round-trips.
    #[test]
    fn rows_with_the_old_flags_still_decode() {
        let base = r#""platform":"telegram","chat_id":"5","chat_type":"dm","thread_id":null,
            "sender_id":"42","sender_name":"ann","platform_message_id":"m1","update_id":7,
            "text":"hi","reply_to":null,"timestamp":"2026-01-01T00:00:00Z""#;
        let cases = [
            (
                r#""kind":"text","internal":false"#,
                Origin::person(MessageKind::Text),
            ),
            (
                r#""kind":"command","internal":false,"from_loopback":true"#,
                Origin::Person {
                    kind: MessageKind::Command,
                    from_loopback: true,
                },
            ),
            (
                r#""kind":"media","internal":false,"attachments":[]"#,
                Origin::person(MessageKind::Media),
            ),
            (
                r#""kind":"text","internal":true,"deliver_to":["telegram:-100:7","no target"]"#,
                Origin::Scheduled {
                    deliver_to: vec![crate::domain::cron::parse_target(
                        "telegram:-100:7",
                        &crate::domain::cron::test_known(),
                    )
                    .unwrap()],
                },
            ),
            (
                r#""kind":"control","internal":true,"control":{"action":"mirror","label":"brief","text":"t"}"#,
                Origin::Control(Control::Mirror {
                    label: "brief".into(),
                    text: "t".into(),
                }),
            ),
            // A control kind without its instruction: nothing to act on.
            (
                r#""kind":"control","internal":true"#,
                Origin::person(MessageKind::Service),
            ),
        ];
        for (flags, origin) in cases {
            let json = format!("{{{base},{flags}}}");
            let ev: MessageEvent =
                serde_json::from_str(&json).unwrap_or_else(|e| panic!("{flags}: {e}"));
            assert_eq!(ev.origin, origin, "{flags}");
            assert_eq!(ev.text, "hi");
            let again: MessageEvent =
                serde_json::from_str(&serde_json::to_string(&ev).unwrap()).unwrap();
            assert_eq!(again, ev, "{flags}");
        }
    }

    /// The whole text travels with the stored event when there is one, and rows without it
    /// (every platform but email) are written exactly as before.
    #[test]
    fn the_full_text_is_kept_only_where_it_differs() {
        let mut ev = MessageEvent::new(
            crate::domain::Platform::named("email"),
            "a@x",
            "a@x",
            "Yes.",
            Origin::person(MessageKind::Text),
            "m1@x".into(),
            chrono::DateTime::UNIX_EPOCH,
        );
        let plain = serde_json::to_string(&ev).unwrap();
        assert!(!plain.contains("full_text"), "{plain}");
        ev.full_text = Some("Yes.\n\n> the question\n-- \nAlice".into());
        let json = serde_json::to_string(&ev).unwrap();
        let back: MessageEvent = serde_json::from_str(&json).unwrap();
        assert_eq!(back, ev);
        assert_eq!(back.text, "Yes.");
    }
}
