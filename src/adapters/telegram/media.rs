//! What a Telegram message carries besides its text: files become typed `Attachment`
//! references (fetched later by `media::Fetcher`), and the things that are not files — a
//! location, venue, contact, poll or dice — become one line of text the model can read.
//!
//! Must not: do I/O, or call a teloxide accessor that panics on odd input (`Sticker::format`
//! does on a sticker flagged both animated and video: the flags are read directly).

use teloxide::types::{FileMeta, Message};

use crate::domain::{Attachment, MediaKind, MediaSource};

/// The files of `msg`, by reference, with what Telegram announced about each.
pub(super) fn attachments(msg: &Message) -> Vec<Attachment> {
    let mut out = Vec::new();
    let mut add = |kind: MediaKind, file: &FileMeta, mime: Option<String>, name: Option<String>| {
        let mut a = Attachment::new(kind, MediaSource::Telegram(file.id.0.clone()));
        a.size = announced_size(file);
        a.mime = mime;
        a.name = name;
        out.push(a);
    };
    // Telegram sends every size of a photo; the last one is the largest.
    if let Some(p) = msg.photo().and_then(|sizes| sizes.last()) {
        add(MediaKind::Photo, &p.file, Some("image/jpeg".into()), None);
    }
    if let Some(d) = msg.document() {
        let mime = d.mime_type.as_ref().map(|m| m.to_string());
        add(MediaKind::Document, &d.file, mime, d.file_name.clone());
    }
    if let Some(v) = msg.video() {
        let mime = v.mime_type.as_ref().map(|m| m.to_string());
        add(MediaKind::Video, &v.file, mime, v.file_name.clone());
    }
    if let Some(v) = msg.voice() {
        let mime = v.mime_type.as_ref().map(|m| m.to_string());
        add(MediaKind::Voice, &v.file, mime, None);
    }
    if let Some(a) = msg.audio() {
        let mime = a.mime_type.as_ref().map(|m| m.to_string());
        add(MediaKind::Audio, &a.file, mime, a.file_name.clone());
    }
    if let Some(a) = msg.animation() {
        let mime = a.mime_type.as_ref().map(|m| m.to_string());
        add(MediaKind::Animation, &a.file, mime, a.file_name.clone());
    }
    if let Some(s) = msg.sticker() {
        let mime = match (s.flags.is_animated, s.flags.is_video) {
            (_, true) => "video/webm",
            (true, false) => "application/x-tgsticker",
            (false, false) => "image/webp",
        };
        let name = match (s.emoji.as_deref(), s.set_name.as_deref()) {
            (Some(e), Some(set)) => Some(format!("{e} from {set}")),
            (Some(e), None) => Some(e.to_string()),
            (None, Some(set)) => Some(format!("from {set}")),
            (None, None) => None,
        };
        add(MediaKind::Sticker, &s.file, Some(mime.into()), name);
    }
    if let Some(v) = msg.video_note() {
        add(MediaKind::VideoNote, &v.file, None, None);
    }
    out
}

/// The size Telegram announced; teloxide fills a missing `file_size` with `u32::MAX`, which
/// is no announcement at all (the fetch checks the real size while reading).
fn announced_size(file: &FileMeta) -> Option<u64> {
    (file.size != u32::MAX).then_some(u64::from(file.size))
}

/// A location, venue, contact, poll or dice as one readable line, e.g.
/// `[location: 52.52000, 13.40500]`; `None` for anything else.
pub(super) fn shared_text(msg: &Message) -> Option<String> {
    if let Some(v) = msg.venue() {
        let (lat, lon) = (v.location.latitude, v.location.longitude);
        return Some(format!(
            "[venue: {}, {} ({lat:.5}, {lon:.5})]",
            v.title, v.address
        ));
    }
    if let Some(l) = msg.location() {
        return Some(format!("[location: {:.5}, {:.5}]", l.latitude, l.longitude));
    }
    if let Some(c) = msg.contact() {
        let name = match &c.last_name {
            Some(last) if !last.is_empty() => format!("{} {last}", c.first_name),
            _ => c.first_name.clone(),
        };
        return Some(format!("[contact: {name}, {}]", c.phone_number));
    }
    if let Some(p) = msg.poll() {
        let options: Vec<&str> = p.options.iter().map(|o| o.text.as_str()).collect();
        return Some(format!(
            "[poll: \"{}\" — options: {}]",
            p.question,
            options.join(", ")
        ));
    }
    if let Some(d) = msg.dice() {
        let emoji = serde_json::to_value(d.emoji)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "🎲".into());
        return Some(format!("[dice {emoji}: {}]", d.value));
    }
    None
}
