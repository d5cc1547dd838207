//! Table tests for what a Telegram message carries besides text: shared things (location,
//! venue, contact, poll, dice) as a readable line, and the attachments files become.

use serde_json::{json, Value};

use super::inbound::Decision;
use super::inbound_tests::{msg, run, update};
use crate::domain::{MediaKind, MediaSource, MessageKind};

/// A private message with `fields` instead of text.
fn carrying(fields: Value) -> Value {
    let mut m = msg(1, "x");
    m.as_object_mut().unwrap().remove("text");
    for (k, v) in fields.as_object().unwrap() {
        m[k] = v.clone();
    }
    m
}

fn ingested(case: &str, m: Value) -> Box<crate::domain::MessageEvent> {
    match run(&update("message", m), &[]) {
        Decision::Ingest(ev) => ev,
        other => panic!("{case}: not ingested: {other:?}"),
    }
}

#[test]
fn shared_things_become_readable_text() {
    let location = json!({ "latitude": 52.52, "longitude": 13.405 });
    // (case, message fields, text the model reads)
    let cases = [
        (
            "location",
            json!({ "location": location }),
            "[location: 52.52000, 13.40500]",
        ),
        (
            "venue (Telegram sends its location too)",
            json!({ "location": location, "venue": { "location": location,
                    "title": "Brandenburg Gate", "address": "Pariser Platz" } }),
            "[venue: Brandenburg Gate, Pariser Platz (52.52000, 13.40500)]",
        ),
        (
            "contact",
            json!({ "contact": { "phone_number": "+44 20 7946 0000", "first_name": "Ada",
                    "last_name": "Lovelace" } }),
            "[contact: Ada Lovelace, +44 20 7946 0000]",
        ),
        (
            "contact without a last name",
            json!({ "contact": { "phone_number": "+1 555", "first_name": "Grace" } }),
            "[contact: Grace, +1 555]",
        ),
        (
            "poll",
            json!({ "poll": { "id": "p", "question": "Lunch?", "options": [
                    { "text": "pizza", "voter_count": 0 }, { "text": "sushi", "voter_count": 0 }],
                    "total_voter_count": 0, "is_closed": false, "is_anonymous": true,
                    "type": "regular", "allows_multiple_answers": false } }),
            "[poll: \"Lunch?\" — options: pizza, sushi]",
        ),
        (
            "dice",
            json!({ "dice": { "emoji": "🎯", "value": 4 } }),
            "[dice 🎯: 4]",
        ),
    ];
    for (case, fields, want) in cases {
        let ev = ingested(case, carrying(fields));
        assert_eq!(ev.kind(), Some(MessageKind::Text), "{case}");
        assert_eq!(ev.text, want, "{case}");
        assert!(ev.attachments.is_empty(), "{case}");
    }
}

#[test]
fn files_become_attachments_with_what_telegram_announced() {
    let sticker = |animated: bool, video: bool| {
        json!({ "sticker": { "file_id": "st", "file_unique_id": "u", "type": "regular",
                "width": 512, "height": 512, "is_animated": animated, "is_video": video,
                "emoji": "😀", "set_name": "Animals", "file_size": 2000 } })
    };
    // (case, fields, kind, file id, mime, size, name)
    type Want = (
        MediaKind,
        &'static str,
        Option<&'static str>,
        Option<u64>,
        Option<&'static str>,
    );
    let cases: Vec<(&str, Value, Want)> = vec![
        (
            "static sticker",
            sticker(false, false),
            (
                MediaKind::Sticker,
                "st",
                Some("image/webp"),
                Some(2000),
                Some("😀 from Animals"),
            ),
        ),
        (
            "video sticker",
            sticker(false, true),
            (
                MediaKind::Sticker,
                "st",
                Some("video/webm"),
                Some(2000),
                Some("😀 from Animals"),
            ),
        ),
        (
            "sticker flagged animated and video (teloxide's format() would panic)",
            sticker(true, true),
            (
                MediaKind::Sticker,
                "st",
                Some("video/webm"),
                Some(2000),
                Some("😀 from Animals"),
            ),
        ),
        (
            "voice",
            json!({ "voice": { "file_id": "vo", "file_unique_id": "u", "duration": 3,
                    "mime_type": "audio/ogg", "file_size": 5000 } }),
            (MediaKind::Voice, "vo", Some("audio/ogg"), Some(5000), None),
        ),
        (
            "document",
            json!({ "document": { "file_id": "do", "file_unique_id": "u",
                    "file_name": "notes.md", "mime_type": "text/markdown", "file_size": 77 } }),
            (
                MediaKind::Document,
                "do",
                Some("text/markdown"),
                Some(77),
                Some("notes.md"),
            ),
        ),
        (
            "photo without a file_size: no announced size",
            json!({ "photo": [{ "file_id": "ph", "file_unique_id": "u", "width": 9,
                    "height": 9 }] }),
            (MediaKind::Photo, "ph", Some("image/jpeg"), None, None),
        ),
    ];
    for (case, fields, (kind, id, mime, size, name)) in cases {
        let ev = ingested(case, carrying(fields));
        assert_eq!(ev.kind(), Some(MessageKind::Media), "{case}");
        let [a] = ev.attachments.as_slice() else {
            panic!("{case}: {:?}", ev.attachments)
        };
        assert_eq!(
            (
                a.kind,
                &a.source,
                a.mime.as_deref(),
                a.size,
                a.name.as_deref()
            ),
            (kind, &MediaSource::Telegram(id.into()), mime, size, name),
            "{case}"
        );
    }
}
