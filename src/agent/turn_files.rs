//! Files inside a turn: what a tool call produced (kept in the media cache, referenced from
//! the tool row, named to the model by a short id and, for a model that sees, shown as image
//! parts), and the files the model attached to its reply.
//!
//! The bytes never reach the store: the tool row carries an [`Attachment`] whose source is
//! [`MediaSource::Cached`], and the outbox names the same reference. A file the cache cannot
//! take is named to the model as lost, and the turn goes on.

pub use crate::domain::{short_id, SHORT_ID};
use crate::domain::{Attachment, MediaKind, MediaSource};
use crate::llm::{Blob, Part};
use crate::media::MediaCache;

/// The hash a reply can send a file by ([`Attachment::file_sha`]).
pub fn file_sha(a: &Attachment) -> Option<&str> {
    a.file_sha()
}

/// What one call's files became: the tool row's references, the lines the model reads, and
/// the parts the wire message carries.
#[derive(Debug, Default)]
pub struct KeptFiles {
    pub media: Vec<Attachment>,
    pub lines: Vec<String>,
    pub parts: Vec<Part>,
}

/// Puts each file in the cache and describes it. `vision`: images go to the model as parts.
pub async fn keep(cache: &MediaCache, files: Vec<Blob>, vision: bool) -> KeptFiles {
    let mut kept = KeptFiles::default();
    for blob in files {
        let sha = match cache.put(&blob.data).await {
            Ok(sha) => sha,
            Err(e) => {
                tracing::warn!(error = %e, mime = %blob.mime, "cannot keep a tool's file in the media cache");
                kept.lines.push(format!(
                    "[file: {} ({}), {} bytes; it could not be kept, so it cannot be attached]",
                    blob.label,
                    blob.mime,
                    blob.data.len()
                ));
                continue;
            }
        };
        let kind = MediaKind::from_mime(&blob.mime);
        let image = matches!(kind, MediaKind::Photo | MediaKind::Animation);
        let mut a = Attachment::new(kind, MediaSource::Cached(sha.clone()));
        a.mime = Some(blob.mime.clone());
        a.size = Some(blob.data.len() as u64);
        a.name = Some(file_name(&blob, &sha));
        a.sha256 = Some(sha.clone());
        let seen = if !image {
            ""
        } else if vision {
            "; shown below"
        } else {
            "; this model cannot see it"
        };
        kept.lines.push(format!(
            "[file {}: {} ({}, {} bytes){seen}; attach_file can send it to the person]",
            short_id(&sha),
            blob.label,
            blob.mime,
            blob.data.len()
        ));
        if image && vision {
            kept.parts.push(Part::Image(blob));
        }
        kept.media.push(a);
    }
    kept
}

/// The name a file is sent under: its label when it looks like a file name, else its short
/// id with an extension for its MIME type.
fn file_name(blob: &Blob, sha: &str) -> String {
    let label = blob.label.trim();
    let named = !label.is_empty()
        && label.contains('.')
        && !label.contains(char::is_whitespace)
        && !label.contains(['/', '\\']);
    if named {
        return label.to_string();
    }
    let ext = match blob.mime.split(';').next().unwrap_or_default().trim() {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        "application/json" => "json",
        _ => "bin",
    };
    format!("{}.{ext}", short_id(sha))
}

/// Adds `files` to `into` in order, once each (by hash).
pub fn add_unique(into: &mut Vec<Attachment>, files: Vec<Attachment>) {
    for f in files {
        let sha = file_sha(&f).map(str::to_string);
        if !into.iter().any(|g| file_sha(g).map(str::to_string) == sha) {
            into.push(f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_image_is_cached_named_and_shown_only_to_a_model_that_sees() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MediaCache::new(dir.path(), std::time::Duration::from_secs(3600));
        let png = Blob::new(
            "image/png",
            b"\x89PNG fake".to_vec(),
            "image from shot__take",
        );
        let seen = keep(&cache, vec![png.clone()], true).await;
        let sha = crate::media::sha256_hex(b"\x89PNG fake");
        assert_eq!(seen.media.len(), 1);
        assert_eq!(seen.media[0].source, MediaSource::Cached(sha.clone()));
        assert_eq!(seen.media[0].kind, MediaKind::Photo);
        assert_eq!(
            seen.media[0].name.as_deref(),
            Some(format!("{}.png", &sha[..12]).as_str())
        );
        assert!(seen.lines[0].starts_with(&format!("[file {}: ", &sha[..12])));
        assert_eq!(seen.parts, vec![Part::Image(png.clone())]);
        assert_eq!(cache.get(&sha).await.as_deref(), Some(&b"\x89PNG fake"[..]));

        let blind = keep(&cache, vec![png], false).await;
        assert!(blind.parts.is_empty());
        assert!(blind.lines[0].contains("this model cannot see it"));

        let mut all = Vec::new();
        add_unique(&mut all, seen.media.clone());
        add_unique(&mut all, blind.media);
        assert_eq!(all, seen.media);
    }
}
