//! A webhook envelope → what the core gets: messages as `MessageEvent`s, approval taps as
//! `Press`es, status callbacks, and the messages Herald cannot read yet (answered politely).
//!
//! One envelope (`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":
//! "messages","value":{…}}]}]}`) may carry several messages and statuses; each becomes one
//! [`Item`]. Lanes: a person's chat is their WhatsApp id, `whatsapp:<wa id>` (the E.164 digits
//! without `+`). The inbox dedupes on the message id (`wamid.…`), which a redelivered webhook
//! carries unchanged. Text, image, audio and voice notes, video, documents and stickers are
//! messages (media by id, fetched later with the token through `GET /{media-id}`); a location,
//! a contact card and a reply button or list choice become one line of text; a reaction is
//! recorded, never a turn.
//!
//! Must not: do I/O, or let a Cloud API field name cross into the event past this file.

use chrono::{TimeZone, Utc};
use serde_json::Value;

use super::WHATSAPP;
use crate::delivery::parse_approval_button;
use crate::domain::{
    Attachment, ChatType, MediaKind, MediaSource, MessageEvent, MessageKind, Origin,
};
use crate::lanes::Press;

/// One thing an envelope said.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Ingest(Box<MessageEvent>),
    /// A tap on an approval question's reply button; `wamid` is the tap's own message id (the
    /// answer quotes it).
    Press {
        press: Press,
        wamid: String,
    },
    /// A message type Herald cannot read: the person is told so, once per message.
    Unreadable {
        chat: String,
        wamid: String,
        what: String,
    },
    Status(Status),
}

/// A status callback about a message Herald sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub wamid: String,
    /// `sent`, `delivered`, `read` or `failed`.
    pub status: String,
    pub recipient: String,
    /// What Herald put in `biz_opaque_callback_data` (the outbox key).
    pub key: Option<String>,
    /// `failed`: Meta's code and title.
    pub error: Option<(i64, String)>,
}

/// Every item of an envelope, in order; `Err` when it is not a WhatsApp envelope at all.
pub fn items(envelope: &Value, api_url: &str) -> Result<Vec<Item>, &'static str> {
    if envelope.get("object").and_then(Value::as_str) != Some("whatsapp_business_account") {
        return Err("not a whatsapp_business_account envelope");
    }
    let entries = envelope
        .get("entry")
        .and_then(Value::as_array)
        .ok_or("no entry list")?;
    let mut out = Vec::new();
    for change in entries
        .iter()
        .filter_map(|e| e.get("changes").and_then(Value::as_array))
        .flatten()
    {
        if change.get("field").and_then(Value::as_str) != Some("messages") {
            continue;
        }
        let Some(value) = change.get("value") else {
            continue;
        };
        let names = contact_names(value);
        for m in list(value, "messages") {
            if let Some(item) = message(m, &names, api_url) {
                out.push(item);
            }
        }
        for s in list(value, "statuses") {
            if let Some(st) = status(s) {
                out.push(Item::Status(st));
            }
        }
    }
    Ok(out)
}

fn list<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// `contacts[].profile.name` by `wa_id`.
fn contact_names(value: &Value) -> Vec<(String, String)> {
    list(value, "contacts")
        .filter_map(|c| {
            Some((
                str_at(c, "/wa_id")?.to_string(),
                str_at(c, "/profile/name")?.to_string(),
            ))
        })
        .collect()
}

fn message(m: &Value, names: &[(String, String)], api_url: &str) -> Option<Item> {
    let from = str_at(m, "/from")?.to_string();
    let wamid = str_at(m, "/id")?.to_string();
    let kind = str_at(m, "/type").unwrap_or("unknown");
    let mut files = Vec::new();
    let text = match kind {
        "text" => str_at(m, "/text/body").unwrap_or_default().to_string(),
        "image" | "audio" | "video" | "document" | "sticker" => {
            let media = m.get(kind).unwrap_or(&Value::Null);
            let caption = str_at(media, "/caption").unwrap_or_default().to_string();
            match attachment(kind, media, api_url) {
                Some(a) => {
                    files.push(a);
                    caption
                }
                // No usable media id: the message is kept, and says what could not be read.
                None => format!("{caption} [a {kind} that could not be fetched]")
                    .trim()
                    .to_string(),
            }
        }
        "location" => location(m.get("location")?),
        "contacts" => contacts(m),
        "interactive" => {
            let reply = m
                .pointer("/interactive/button_reply")
                .or_else(|| m.pointer("/interactive/list_reply"))?;
            let id = str_at(reply, "/id").unwrap_or_default();
            if let Some((approval, approve)) = parse_approval_button(id) {
                let press = Press {
                    approval_id: approval.to_string(),
                    approve,
                    platform: WHATSAPP,
                    chat_id: from.clone(),
                    sender_id: from,
                    sender_roles: Vec::new(),
                };
                return Some(Item::Press { press, wamid });
            }
            str_at(reply, "/title").unwrap_or_default().to_string()
        }
        "button" => str_at(m, "/button/text").unwrap_or_default().to_string(),
        "reaction" => {
            let emoji = str_at(m, "/reaction/emoji").unwrap_or_default();
            let mut ev = event(&from, &wamid, &format!("(reacted {emoji})"), m, names);
            ev.reply_to = str_at(m, "/reaction/message_id").map(str::to_string);
            ev.origin = Origin::person(MessageKind::Service);
            return Some(Item::Ingest(Box::new(ev)));
        }
        other => {
            return Some(Item::Unreadable {
                chat: from,
                wamid,
                what: other.chars().take(40).collect(),
            })
        }
    };
    let mut ev = event(&from, &wamid, &text, m, names);
    let kind = if text.trim_start().starts_with('/') {
        MessageKind::Command
    } else if text.trim().is_empty() && !files.is_empty() {
        MessageKind::Media
    } else {
        MessageKind::Text
    };
    ev.origin = Origin::person(kind);
    ev.attachments = files;
    Some(Item::Ingest(Box::new(ev)))
}

fn event(
    from: &str,
    wamid: &str,
    text: &str,
    m: &Value,
    names: &[(String, String)],
) -> MessageEvent {
    let mut ev = MessageEvent::text(WHATSAPP, from, from, text);
    ev.chat_type = ChatType::Dm;
    ev.sender_name = names
        .iter()
        .find(|(id, _)| id == from)
        .map_or_else(|| format!("+{from}"), |(_, n)| n.clone());
    ev.platform_message_id = wamid.to_string();
    ev.reply_to = Some(wamid.to_string());
    // Meta's send time; the stamp of arrival when it does not read.
    if let Some(at) = str_at(m, "/timestamp")
        .and_then(|t| t.parse::<i64>().ok())
        .and_then(|t| Utc.timestamp_opt(t, 0).single())
    {
        ev.timestamp = at;
    }
    ev
}

/// A media object (`{"id","mime_type","sha256","filename"?,"voice"?}`) as an attachment fetched
/// later through `GET {api_url}/{id}` with the token.
fn attachment(kind: &str, media: &Value, api_url: &str) -> Option<Attachment> {
    let id = str_at(media, "/id")?;
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return None;
    }
    let mime = str_at(media, "/mime_type").map(str::to_string);
    let voice = media.get("voice").and_then(Value::as_bool) == Some(true);
    let media_kind = match kind {
        "image" => MediaKind::Photo,
        "sticker" => MediaKind::Sticker,
        "audio" if voice => MediaKind::Voice,
        "audio" => MediaKind::Audio,
        "video" => MediaKind::Video,
        _ => mime
            .as_deref()
            .map_or(MediaKind::Document, |m| match MediaKind::from_mime(m) {
                MediaKind::Photo => MediaKind::Photo,
                _ => MediaKind::Document,
            }),
    };
    let source = MediaSource::Authorized {
        platform: WHATSAPP,
        url: format!("{}/{id}", api_url.trim_end_matches('/')),
    };
    let mut a = Attachment::new(media_kind, source);
    a.mime = mime;
    a.name = str_at(media, "/filename").map(str::to_string);
    Some(a)
}

fn location(l: &Value) -> String {
    let num = |k: &str| l.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let mut line = format!("[location: {:.5}, {:.5}", num("latitude"), num("longitude"));
    for k in ["name", "address"] {
        if let Some(s) = l.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()) {
            line.push_str(&format!(", {s}"));
        }
    }
    line.push(']');
    line
}

fn contacts(m: &Value) -> String {
    let people: Vec<String> = list(m, "contacts")
        .map(|c| {
            let name = str_at(c, "/name/formatted_name").unwrap_or("someone");
            let phone = str_at(c, "/phones/0/phone").unwrap_or("");
            format!("{name} {phone}").trim().to_string()
        })
        .collect();
    format!("[contact: {}]", people.join("; "))
}

fn status(s: &Value) -> Option<Status> {
    let error = s.pointer("/errors/0").map(|e| {
        let code = e.get("code").and_then(Value::as_i64).unwrap_or(0);
        let title = str_at(e, "/title")
            .or_else(|| str_at(e, "/message"))
            .unwrap_or("no title");
        (code, title.chars().take(200).collect())
    });
    Some(Status {
        wamid: str_at(s, "/id")?.to_string(),
        status: str_at(s, "/status")?.to_string(),
        recipient: str_at(s, "/recipient_id").unwrap_or_default().to_string(),
        key: str_at(s, "/biz_opaque_callback_data").map(str::to_string),
        error,
    })
}
