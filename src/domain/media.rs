//! A file a person sent (or a tool produced), by reference: what it is, how big, where to
//! fetch it again — never its bytes. The inbox stores it inside the event, the transcript on
//! the user row that carried it, so a later turn (or another replica) refetches by reference.
//!
//! Rows written before the typed form carried `{kind, reference}` with Telegram's kind names
//! or, from Discord, a MIME type as the kind; both still decode.

use serde::{Deserialize, Serialize};

use super::Platform;

/// What kind of thing the file is, as far as reading it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    Photo,
    Voice,
    Audio,
    Video,
    VideoNote,
    Animation,
    Sticker,
    Document,
}

impl MediaKind {
    /// From an old row's `kind` (Telegram's name, or Discord's MIME type) or a MIME type.
    pub fn from_legacy(kind: &str) -> MediaKind {
        match kind {
            "photo" => MediaKind::Photo,
            "voice" => MediaKind::Voice,
            "audio" => MediaKind::Audio,
            "video" => MediaKind::Video,
            "video_note" => MediaKind::VideoNote,
            "animation" => MediaKind::Animation,
            "sticker" => MediaKind::Sticker,
            k => MediaKind::from_mime(k),
        }
    }

    /// A file's kind from its MIME type alone (Discord attachments, web uploads).
    pub fn from_mime(mime: &str) -> MediaKind {
        let mime = mime.to_ascii_lowercase();
        if mime == "image/gif" {
            MediaKind::Animation
        } else if mime.starts_with("image/") {
            MediaKind::Photo
        } else if mime.starts_with("audio/ogg") || mime.starts_with("audio/opus") {
            MediaKind::Voice
        } else if mime.starts_with("audio/") {
            MediaKind::Audio
        } else if mime.starts_with("video/") {
            MediaKind::Video
        } else {
            MediaKind::Document
        }
    }

    /// "a photo", "a voice message", … for a sentence.
    pub fn phrase(self) -> &'static str {
        match self {
            MediaKind::Photo => "a photo",
            MediaKind::Voice => "a voice message",
            MediaKind::Audio => "an audio file",
            MediaKind::Video => "a video",
            MediaKind::VideoNote => "a video message",
            MediaKind::Animation => "an animation",
            MediaKind::Sticker => "a sticker",
            MediaKind::Document => "a document",
        }
    }
}

/// Where the bytes can be fetched again.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "from", content = "id", rename_all = "snake_case")]
pub enum MediaSource {
    /// A Telegram `file_id` (resolved with `getFile` at fetch time; valid for this bot).
    Telegram(String),
    /// A URL fetched as is (Discord's CDN; signed Discord URLs expire after about a day).
    Url(String),
    /// A Discord sticker id (rendered, not fetched).
    DiscordSticker(String),
    /// Bytes Herald holds itself under the media cache, named by their SHA-256 (a tool's
    /// image, a web upload).
    Cached(String),
    /// A URL fetched with the platform's own token (Slack's `url_private`), shown only to the
    /// hosts the platform declares for its files (`PlatformSpec::files`).
    Authorized { platform: Platform, url: String },
}

/// A file attached to a message, recorded by reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredAttachment")]
pub struct Attachment {
    pub kind: MediaKind,
    pub source: MediaSource,
    /// MIME type as the platform announced it (or as sniffed once fetched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    /// Size in bytes as announced (checked again while fetching).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// The file's name, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Hex SHA-256 of the bytes, once they have been fetched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Seconds, for voice notes, audio and video.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<u32>,
}

impl Attachment {
    pub fn new(kind: MediaKind, source: MediaSource) -> Attachment {
        Attachment {
            kind,
            source,
            mime: None,
            size: None,
            name: None,
            sha256: None,
            duration_secs: None,
        }
    }

    /// The SHA-256 a reply can send the file by: its cached source, or the hash of bytes
    /// fetched once.
    pub fn file_sha(&self) -> Option<&str> {
        match &self.source {
            MediaSource::Cached(sha) => Some(sha),
            _ => self.sha256.as_deref(),
        }
    }

    /// "a photo", "a document (report.pdf)", for one line to the model or the person.
    pub fn describe(&self) -> String {
        match &self.name {
            Some(name) if !name.is_empty() => format!("{} ({name})", self.kind.phrase()),
            _ => self.kind.phrase().to_string(),
        }
    }
}

/// How many hex digits of a file's SHA-256 name it to the model and in the chat.
pub const SHORT_ID: usize = 12;

/// The short id of a file's hash (its first [`SHORT_ID`] hex digits).
pub fn short_id(sha: &str) -> &str {
    &sha[..sha.len().min(SHORT_ID)]
}

/// Both stored shapes of an attachment.
#[derive(Deserialize)]
#[serde(untagged)]
enum StoredAttachment {
    Typed {
        kind: MediaKind,
        source: MediaSource,
        #[serde(default)]
        mime: Option<String>,
        #[serde(default)]
        size: Option<u64>,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        sha256: Option<String>,
        #[serde(default)]
        duration_secs: Option<u32>,
    },
    /// Before the typed form: Telegram kinds with a file id, Discord MIME types with a URL,
    /// Discord stickers by id.
    Legacy { kind: String, reference: String },
}

impl From<StoredAttachment> for Attachment {
    fn from(s: StoredAttachment) -> Attachment {
        match s {
            StoredAttachment::Typed {
                kind,
                source,
                mime,
                size,
                name,
                sha256,
                duration_secs,
            } => Attachment {
                kind,
                source,
                mime,
                size,
                name,
                sha256,
                duration_secs,
            },
            StoredAttachment::Legacy { kind, reference } => {
                let media = MediaKind::from_legacy(&kind);
                let source =
                    if reference.starts_with("http://") || reference.starts_with("https://") {
                        MediaSource::Url(reference)
                    } else if media == MediaKind::Sticker
                        && reference.bytes().all(|b| b.is_ascii_digit())
                    {
                        MediaSource::DiscordSticker(reference)
                    } else {
                        MediaSource::Telegram(reference)
                    };
                let mut a = Attachment::new(media, source);
                if kind.contains('/') {
                    a.mime = Some(kind);
                }
                a
            }
        }
    }
}

/// "a voice message", "a photo and a document", … for a message's attachments.
pub fn describe_all(attachments: &[Attachment]) -> String {
    let mut names: Vec<&str> = Vec::new();
    for a in attachments {
        let name = a.kind.phrase();
        if !names.contains(&name) {
            names.push(name);
        }
    }
    match names.as_slice() {
        [] => "a message without text".to_string(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_attachments_round_trip_and_old_rows_decode() {
        let mut a = Attachment::new(
            MediaKind::Document,
            MediaSource::Url("https://cdn/x.pdf".into()),
        );
        a.mime = Some("application/pdf".into());
        a.size = Some(1234);
        a.name = Some("x.pdf".into());
        let back: Attachment = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back, a);

        // (old row, kind, source, mime)
        let cases = [
            (
                r#"{"kind":"photo","reference":"AgAD"}"#,
                MediaKind::Photo,
                MediaSource::Telegram("AgAD".into()),
                None,
            ),
            (
                r#"{"kind":"voice","reference":"AwAD"}"#,
                MediaKind::Voice,
                MediaSource::Telegram("AwAD".into()),
                None,
            ),
            (
                r#"{"kind":"image/png","reference":"https://cdn/a.png"}"#,
                MediaKind::Photo,
                MediaSource::Url("https://cdn/a.png".into()),
                Some("image/png"),
            ),
            (
                r#"{"kind":"application/pdf","reference":"https://cdn/b.pdf"}"#,
                MediaKind::Document,
                MediaSource::Url("https://cdn/b.pdf".into()),
                Some("application/pdf"),
            ),
            (
                r#"{"kind":"sticker","reference":"7493"}"#,
                MediaKind::Sticker,
                MediaSource::DiscordSticker("7493".into()),
                None,
            ),
            (
                r#"{"kind":"sticker","reference":"CAACAgIAAx"}"#,
                MediaKind::Sticker,
                MediaSource::Telegram("CAACAgIAAx".into()),
                None,
            ),
        ];
        for (json, kind, source, mime) in cases {
            let a: Attachment = serde_json::from_str(json).unwrap();
            assert_eq!(
                (a.kind, &a.source, a.mime.as_deref()),
                (kind, &source, mime),
                "{json}"
            );
        }
    }

    #[test]
    fn descriptions_name_each_kind_once() {
        let att = |k| Attachment::new(k, MediaSource::Telegram("x".into()));
        assert_eq!(describe_all(&[]), "a message without text");
        assert_eq!(describe_all(&[att(MediaKind::Voice)]), "a voice message");
        assert_eq!(
            describe_all(&[
                att(MediaKind::Photo),
                att(MediaKind::Photo),
                att(MediaKind::Document)
            ]),
            "a photo and a document"
        );
        let mut doc = att(MediaKind::Document);
        doc.name = Some("notes.md".into());
        assert_eq!(doc.describe(), "a document (notes.md)");
        assert_eq!(MediaKind::from_mime("image/jpeg"), MediaKind::Photo);
        assert_eq!(
            MediaKind::from_mime("audio/ogg; codecs=opus"),
            MediaKind::Voice
        );
        assert_eq!(MediaKind::from_mime("text/plain"), MediaKind::Document);
    }
}
