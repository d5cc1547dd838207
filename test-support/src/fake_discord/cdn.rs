//! The fake's CDN: attachment bytes a test registered, served without authorization at
//! `http://127.0.0.1:<port>/attachments/<id>/<name>` (the REST listener, as Discord's CDN is
//! another host the bot reaches with no token), counting downloads, with the same per-file
//! faults as the fake Telegram's file route; and MESSAGE_CREATEs that carry those files and
//! stickers.
//!
//! Must not: require a token (Discord's CDN does not), or hold the state lock across an await.

use std::sync::Arc;

use axum::response::Response;
use serde_json::{json, Value};

use super::{payloads, FakeDiscord, Shared};
use crate::fake_telegram::{serve_bytes, FileFault};

/// A file on the fake CDN, as a message's `attachments` entry announces it. `size` may be
/// changed before dispatch to announce a size that is not the real one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdnFile {
    pub id: u64,
    pub filename: String,
    pub content_type: String,
    pub size: u64,
    pub url: String,
}

pub(crate) struct Stored {
    filename: String,
    content_type: String,
    bytes: Arc<[u8]>,
    fault: Option<FileFault>,
    downloads: usize,
}

impl FakeDiscord {
    /// Registers `bytes` on the CDN and returns the attachment that points at them.
    pub fn add_cdn_file(&self, filename: &str, content_type: &str, bytes: &[u8]) -> CdnFile {
        let id = self.shared.new_id();
        self.shared.cdn().insert(
            id,
            Stored {
                filename: filename.to_string(),
                content_type: content_type.to_string(),
                bytes: bytes.into(),
                fault: None,
                downloads: 0,
            },
        );
        CdnFile {
            id,
            filename: filename.to_string(),
            content_type: content_type.to_string(),
            size: bytes.len() as u64,
            // Real attachment URLs are signed and expire; the fake ignores the query.
            url: format!("{}/attachments/{id}/{filename}?ex=0&hm=fake", self.api_url),
        }
    }

    /// Makes CDN file `id` misbehave from now on (`Understated` only changes how it is
    /// served: set the announced `size` on the [`CdnFile`]).
    pub fn set_cdn_fault(&self, id: u64, fault: FileFault) {
        if let Some(f) = self.shared.cdn().get_mut(&id) {
            f.fault = Some(fault);
        }
    }

    /// Downloads of CDN file `id` started so far.
    pub fn cdn_downloads(&self, id: u64) -> usize {
        self.shared.cdn().get(&id).map_or(0, |f| f.downloads)
    }

    /// A user's MESSAGE_CREATE carrying `files` and stickers `(id, name)` beside `content`.
    /// Returns the message id.
    pub fn dispatch_message_with_files(
        &self,
        channel_id: u64,
        guild_id: Option<u64>,
        author_id: u64,
        content: &str,
        files: &[CdnFile],
        stickers: &[(u64, &str)],
    ) -> u64 {
        let id = self.shared.new_id();
        let mut msg = payloads::message(payloads::MessageParts {
            id,
            channel_id,
            guild_id,
            author_id,
            content,
            mentions: vec![],
            reference: None,
        });
        msg["attachments"] = Value::Array(files.iter().map(attachment_json).collect());
        msg["sticker_items"] = stickers
            .iter()
            .map(|(sid, name)| json!({ "id": sid.to_string(), "name": name, "format_type": 1 }))
            .collect();
        let mut inner = self.shared.lock();
        if let Some(g) = guild_id {
            inner.channel_guild.insert(channel_id, g);
        }
        inner.messages.insert(id, msg.clone());
        self.shared
            .dispatch_locked(&mut inner, "MESSAGE_CREATE", msg);
        id
    }
}

fn attachment_json(f: &CdnFile) -> Value {
    json!({
        "id": f.id.to_string(),
        "filename": f.filename,
        "size": f.size,
        "url": f.url,
        "proxy_url": f.url,
        "content_type": f.content_type,
    })
}

/// `GET /attachments/<id>/<name>` (`rest` is what follows `/attachments/`).
pub(crate) fn serve(shared: &Shared, rest: &str) -> Response {
    let found = rest
        .split_once('/')
        .and_then(|(id, name)| Some((id.parse::<u64>().ok()?, name)))
        .and_then(|(id, name)| {
            let mut cdn = shared.cdn();
            let f = cdn.get_mut(&id).filter(|f| f.filename == name)?;
            f.downloads += 1;
            Some((f.bytes.clone(), f.fault.clone(), f.content_type.clone()))
        });
    match found {
        Some((bytes, fault, mime)) => serve_bytes(bytes, fault.as_ref(), &mime),
        None => serve_bytes(Arc::from(&b""[..]), Some(&FileFault::Missing), "text/plain"),
    }
}

impl Shared {
    pub(crate) fn cdn(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<u64, Stored>> {
        self.cdn.lock().unwrap_or_else(|e| e.into_inner())
    }
}
