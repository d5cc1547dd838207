//! Reading a message's attachments at turn time: fetch each under the cap (the cache first),
//! then by kind — an image becomes an image part (or a note for a model that cannot see), a
//! voice note or audio file a transcript, a document its text, anything else is named. Each
//! outcome goes to a [`Reading`]; a failure is one line and one log line, never a lost message.
//!
//! Documents and the images a model will see are decoded by the isolated worker
//! ([`Decoder`]), never in this process; audio is not decoded here at all (the speech-to-text
//! endpoint reads it). Also refetches the images of history rows still in view, for a model
//! that sees, each checked again unless this process already passed its hash.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::config::Config;
use crate::domain::{Attachment, MediaKind};
use crate::llm::{Blob, Part};
use crate::media::images::{rows_in_view, HistoryImages};
use crate::store::StoredMessage;

use super::decode::{Decoder, JobKind, Outcome, WireFormat};
use super::fetch::{Fetched, Fetcher};
use super::reading::{is_image, Item, Reading};
use super::sniff::sniff;
use super::transcribe::Transcriber;
use super::{MediaCache, MediaError};

/// Everything a turn needs to read files, built once at start.
pub struct MediaReader {
    fetcher: Fetcher,
    /// Documents and images are decoded in `herald decode` child processes.
    decoder: Decoder,
    transcriber: Option<Transcriber>,
    /// Spoken replies (`[voice]`); the turn's voice step reaches it through the reader.
    speaker: Option<super::Speaker>,
    vision: bool,
    keep_images_turns: u32,
    /// The decoder's verdict on each image hash (`None`: passed), so history images are not
    /// checked again at every turn.
    image_verdicts: Mutex<HashMap<String, Option<MediaError>>>,
}

/// Image verdicts remembered before the map starts over.
const IMAGES_REMEMBERED: usize = 4096;

impl MediaReader {
    /// Decoding happens in child processes, which the decoder owns and kills when a turn is
    /// dropped: nothing of the reader's runs on the app's tracker.
    pub fn from_config(config: &Config, cache: MediaCache) -> MediaReader {
        MediaReader::with_decoder(config, cache, Decoder::from_config(config))
    }

    /// A reader whose decoder is given (benchmarks and tests choose the worker).
    pub fn with_decoder(config: &Config, cache: MediaCache, decoder: Decoder) -> MediaReader {
        MediaReader {
            fetcher: Fetcher::from_config(config, cache),
            decoder,
            transcriber: Transcriber::from_config(config),
            speaker: super::Speaker::from_config(config),
            vision: config.llm.vision,
            keep_images_turns: config.media.keep_images_turns,
            image_verdicts: Mutex::new(HashMap::new()),
        }
    }

    /// The speech API client, when `voice.tts_url` is set.
    pub fn speaker(&self) -> Option<&super::Speaker> {
        self.speaker.as_ref()
    }

    /// Reads every attachment of a message, in order.
    pub async fn read(&self, attachments: &[Attachment]) -> Reading {
        let mut reading = Reading::default();
        for a in attachments {
            let mut a = a.clone();
            let item = self.item(&mut a).await;
            let outcome = match &item {
                Item::Failed(_) => "failed",
                Item::NotRead => "not_read",
                _ => "read",
            };
            if let Item::Failed(e) = &item {
                tracing::warn!(kind = ?a.kind, size = a.size, error = %e, "attachment not read");
            }
            metrics::counter!("herald_media_read_total", "kind" => kind_label(a.kind), "outcome" => outcome)
                .increment(1);
            reading.add(a, item);
        }
        reading
    }

    /// What one attachment says; `a` gets its hash and sniffed type once fetched.
    async fn item(&self, a: &mut Attachment) -> Item {
        match a.kind {
            MediaKind::Sticker => return Item::Sticker,
            MediaKind::Video | MediaKind::VideoNote => return Item::NotRead,
            MediaKind::Animation if !is_image(a) => return Item::NotRead,
            _ => {}
        }
        if matches!(a.kind, MediaKind::Voice | MediaKind::Audio) && self.transcriber.is_none() {
            return Item::Failed(MediaError::NoTranscriber);
        }
        let fetched = match self.fetcher.fetch(a).await {
            Ok(f) => f,
            Err(e) => return Item::Failed(e),
        };
        let mime = settle_mime(a, &fetched);
        a.sha256 = Some(fetched.sha256.clone());
        a.size = Some(fetched.bytes.len() as u64);
        a.mime = Some(mime.clone());
        if is_image(a) {
            if !mime.starts_with("image/") {
                return Item::Failed(MediaError::Corrupt("it is not an image".into()));
            }
            if !self.vision {
                return Item::Image(None);
            }
            if let Err(e) = self.check_image(&fetched, &mime).await {
                return Item::Failed(e);
            }
            return Item::Image(Some(blob(a, &fetched, &mime)));
        }
        match a.kind {
            MediaKind::Voice | MediaKind::Audio => self.transcribe(a, &fetched, &mime).await,
            _ => self.document(a, &fetched, &mime).await,
        }
    }

    async fn transcribe(&self, a: &Attachment, f: &Fetched, mime: &str) -> Item {
        let Some(t) = &self.transcriber else {
            return Item::Failed(MediaError::NoTranscriber);
        };
        let name = a.name.clone().unwrap_or_else(|| default_name(mime));
        match t.transcribe(&f.bytes, mime, &name).await {
            Ok(text) => Item::Transcript(text),
            Err(e) => Item::Failed(e),
        }
    }

    async fn document(&self, a: &Attachment, f: &Fetched, mime: &str) -> Item {
        let read = self
            .decoder
            .decode(JobKind::Document, &f.bytes, Some(mime), a.name.as_deref())
            .await;
        match read {
            Ok(Outcome::Document {
                format,
                text,
                truncated,
                total_chars,
            }) => Item::Document {
                format: format_label(&format),
                cut_from: truncated.then_some(total_chars),
                text,
            },
            Ok(_) => Item::NotRead,
            Err(e) => Item::Failed(e),
        }
    }

    /// An image's header read by the decoder: over the pixel cap or unreadable is an error.
    async fn check_image(&self, f: &Fetched, mime: &str) -> Result<(), MediaError> {
        if let Some(verdict) = self.image_verdicts.lock().unwrap().get(&f.sha256) {
            return verdict.clone().map_or(Ok(()), Err);
        }
        let verdict = self
            .decoder
            .decode(JobKind::Image, &f.bytes, Some(mime), None)
            .await
            .err();
        // A deadline missed under load says nothing about the file: it is asked again.
        if !matches!(verdict, Some(MediaError::DecodeTimeout { .. })) {
            let mut verdicts = self.image_verdicts.lock().unwrap();
            if verdicts.len() >= IMAGES_REMEMBERED {
                verdicts.clear();
            }
            verdicts.insert(f.sha256.clone(), verdict.clone());
        }
        verdict.map_or(Ok(()), Err)
    }

    /// The images of history rows still in view, fetched again (the cache first). A row whose
    /// image cannot be had any more gets the placeholder.
    pub async fn history_images(&self, history: &[StoredMessage]) -> HistoryImages {
        let mut images = HistoryImages {
            vision: self.vision,
            parts: HashMap::new(),
        };
        if !self.vision {
            return images;
        }
        for id in rows_in_view(history, self.keep_images_turns) {
            let Some(row) = history.iter().find(|r| r.id == id) else {
                continue;
            };
            let mut parts = Vec::new();
            for a in row.media.iter().filter(|a| is_image(a)) {
                match self.fetcher.fetch(a).await {
                    Ok(f) => {
                        let mime = settle_mime(a, &f);
                        if let Err(e) = self.check_image(&f, &mime).await {
                            tracing::info!(row = id, error = %e, "an image of the history is not shown");
                            continue;
                        }
                        parts.push(Part::Image(blob(a, &f, &mime)));
                    }
                    Err(e) => {
                        tracing::info!(row = id, error = %e, "an image of the history is no longer available");
                    }
                }
            }
            if !parts.is_empty() {
                images.parts.insert(id, parts);
            }
        }
        images
    }
}

/// The bytes' own type when they have a recognisable one, else what was announced.
fn settle_mime(a: &Attachment, f: &Fetched) -> String {
    sniff(&f.bytes)
        .map(str::to_string)
        .or_else(|| a.mime.clone())
        .or_else(|| f.mime.clone())
        .unwrap_or_else(|| "application/octet-stream".into())
}

fn blob(a: &Attachment, f: &Fetched, mime: &str) -> Blob {
    Blob::new(mime, f.bytes.clone(), a.describe())
}

fn default_name(mime: &str) -> String {
    let ext = mime
        .split(['/', ';'])
        .nth(1)
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .unwrap_or("bin");
    format!("audio.{ext}")
}

fn format_label(f: &WireFormat) -> String {
    match f {
        WireFormat::Text => "text".into(),
        WireFormat::Markdown => "Markdown".into(),
        WireFormat::Code(lang) => format!("{lang} code"),
        WireFormat::Csv => "CSV".into(),
        WireFormat::Json => "JSON".into(),
        WireFormat::Pdf => "PDF".into(),
        WireFormat::Word => "Word document".into(),
        WireFormat::OpenDocument => "OpenDocument text".into(),
    }
}

fn kind_label(k: MediaKind) -> &'static str {
    match k {
        MediaKind::Photo => "photo",
        MediaKind::Voice => "voice",
        MediaKind::Audio => "audio",
        MediaKind::Video => "video",
        MediaKind::VideoNote => "video_note",
        MediaKind::Animation => "animation",
        MediaKind::Sticker => "sticker",
        MediaKind::Document => "document",
    }
}
