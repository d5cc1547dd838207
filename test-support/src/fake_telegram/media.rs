//! Messages that carry something besides text — a photo, voice note, document, sticker,
//! location, venue, contact, poll or dice — in the Bot API's shapes, injected like text
//! messages. A file-carrying message names a `file_id`; register its bytes with
//! [`FakeTelegram::add_file`] so `getFile` and the download serve them.
//!
//! Must not: produce a shape teloxide 0.17 would refuse (every required field is present).

use serde_json::{json, Value};

use super::json::message_json;
use super::FakeTelegram;

/// What a message carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Media {
    /// One photo in two sizes (the larger is `file_id`), with an optional caption.
    Photo {
        file_id: String,
        size: u64,
        caption: Option<String>,
    },
    Voice {
        file_id: String,
        size: u64,
        duration: u32,
    },
    Document {
        file_id: String,
        size: u64,
        name: String,
        mime: String,
        caption: Option<String>,
    },
    Sticker {
        file_id: String,
        emoji: String,
        set_name: String,
    },
    Location {
        latitude: f64,
        longitude: f64,
    },
    Venue {
        latitude: f64,
        longitude: f64,
        title: String,
        address: String,
    },
    Contact {
        phone: String,
        first_name: String,
        last_name: Option<String>,
    },
    Poll {
        question: String,
        options: Vec<String>,
    },
    Dice {
        emoji: String,
        value: u8,
    },
}

impl Media {
    /// The message fields this media adds (merged into a message without `text`).
    pub fn fields(&self) -> Value {
        match self {
            Media::Photo {
                file_id,
                size,
                caption,
            } => with_caption(
                json!({ "photo": [
                    { "file_id": format!("{file_id}-thumb"), "file_unique_id": format!("{file_id}-t"),
                      "width": 90, "height": 90, "file_size": 1000 },
                    { "file_id": file_id, "file_unique_id": format!("{file_id}-u"),
                      "width": 1280, "height": 960, "file_size": size },
                ] }),
                caption,
            ),
            Media::Voice {
                file_id,
                size,
                duration,
            } => json!({ "voice": { "file_id": file_id, "file_unique_id": format!("{file_id}-u"),
                "duration": duration, "mime_type": "audio/ogg", "file_size": size } }),
            Media::Document {
                file_id,
                size,
                name,
                mime,
                caption,
            } => with_caption(
                json!({ "document": { "file_id": file_id, "file_unique_id": format!("{file_id}-u"),
                    "file_name": name, "mime_type": mime, "file_size": size } }),
                caption,
            ),
            Media::Sticker {
                file_id,
                emoji,
                set_name,
            } => json!({ "sticker": { "file_id": file_id, "file_unique_id": format!("{file_id}-u"),
                "type": "regular", "width": 512, "height": 512, "is_animated": false,
                "is_video": false, "emoji": emoji, "set_name": set_name, "file_size": 20_000 } }),
            Media::Location {
                latitude,
                longitude,
            } => json!({ "location": { "latitude": latitude, "longitude": longitude } }),
            Media::Venue {
                latitude,
                longitude,
                title,
                address,
            } => json!({
                "location": { "latitude": latitude, "longitude": longitude },
                "venue": { "location": { "latitude": latitude, "longitude": longitude },
                           "title": title, "address": address },
            }),
            Media::Contact {
                phone,
                first_name,
                last_name,
            } => {
                let mut contact = json!({ "phone_number": phone, "first_name": first_name });
                if let Some(last) = last_name {
                    contact["last_name"] = json!(last);
                }
                json!({ "contact": contact })
            }
            Media::Poll { question, options } => json!({ "poll": {
                "id": "poll-1", "question": question,
                "options": options.iter().map(|o| json!({ "text": o, "voter_count": 0 }))
                    .collect::<Vec<_>>(),
                "total_voter_count": 0, "is_closed": false, "is_anonymous": true,
                "type": "regular", "allows_multiple_answers": false } }),
            Media::Dice { emoji, value } => json!({ "dice": { "emoji": emoji, "value": value } }),
        }
    }
}

fn with_caption(mut fields: Value, caption: &Option<String>) -> Value {
    if let Some(c) = caption {
        fields["caption"] = json!(c);
    }
    fields
}

/// A message from `from_id` in `chat_id` carrying `media` instead of text.
pub fn media_message_json(message_id: i64, chat_id: i64, from_id: i64, media: &Media) -> Value {
    let mut message = message_json(message_id, chat_id, from_id, "");
    if let Some(m) = message.as_object_mut() {
        m.remove("text");
    }
    super::json::merge(&mut message, media.fields());
    message
}

impl FakeTelegram {
    /// A message carrying `media` in chat `chat_id` (private when > 0); returns the update id.
    pub fn push_media(&self, chat_id: i64, from_id: i64, media: &Media) -> i64 {
        self.push_message(|id| media_message_json(id, chat_id, from_id, media))
    }
}
