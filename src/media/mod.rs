//! Reading what people send besides text: fetching a file by its reference under a size cap,
//! turning a voice note into text, a document into text, an image into an image part.
//!
//! Nothing here touches the store: a turn asks for an attachment's meaning and gets text and
//! parts back; the transcript keeps the reference (`domain::Attachment`), never the bytes.

pub mod cache;
pub mod decode;
pub mod document;
pub mod fetch;
pub mod html;
pub mod images;
pub mod read;
pub mod reading;
pub mod sniff;
pub mod speech;
pub mod transcribe;

#[cfg(test)]
mod document_tests;

pub use cache::{is_sha256, sha256_hex, MediaCache};
pub use decode::Decoder;
pub use document::{read_document, DocFormat, DocumentText};
pub use fetch::{Fetched, Fetcher};
pub use read::MediaReader;
pub use reading::{Item, Reading};
pub use sniff::{is_text, sniff};
pub use speech::Speaker;
pub use transcribe::Transcriber;

/// Why one attachment could not be read. Each turns into one line the person (or the model)
/// reads; none stops the lane.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaError {
    #[error("the file is {}, over the {} limit", human_size(*.size), human_size(*.max))]
    TooLarge { size: u64, max: u64 },
    #[error("the download did not finish in time")]
    Timeout,
    #[error("the download failed: {0}")]
    Fetch(String),
    /// The guarded client would not go where the file's address or its server led
    /// (`net::Refusal`'s words): another host, an internal address, a scheme not fetched.
    #[error("the download was refused: {0}")]
    Refused(String),
    /// The platform the file lives on is not configured here (a Telegram file id on a replica
    /// without a bot token).
    #[error("files from {0} cannot be fetched here")]
    NoSource(&'static str),
    /// The bytes are not what they claim (a truncated image, a PDF that does not parse).
    #[error("the file could not be read: {0}")]
    Corrupt(String),
    /// Inflating it (a PDF stream, a zip entry) would pass `media.max_unpacked_bytes`.
    #[error("it is too large when unpacked (over the {} limit)", human_size(*.max))]
    Unpacked { max: u64 },
    #[error("it has {pages} pages, over the {max}-page limit")]
    TooManyPages { pages: u64, max: u64 },
    #[error("the image is {width}x{height}, over the limit of {} pixels", megapixels(*.max))]
    ImageTooLarge { width: u64, height: u64, max: u64 },
    /// The isolated reader died on it (a stack overflow, a memory fault, an abort).
    #[error("the file could not be read: the reader crashed on it ({0})")]
    Crashed(String),
    /// The `herald decode` worker could not be found or started on this machine.
    #[error("the isolated reader could not be started: {0}")]
    NoDecoder(String),
    #[error("reading it took longer than {secs} s, so it was stopped")]
    DecodeTimeout { secs: u64 },
    #[error("reading it needed more than {mb} MB of memory, so it was stopped")]
    DecodeMemory { mb: u64 },
    #[error("no speech-to-text endpoint is configured")]
    NoTranscriber,
    #[error("the speech-to-text endpoint failed: {0}")]
    Transcription(String),
    /// The text-to-speech API of `[voice]` failed (the reply goes as text only).
    #[error("the speech API failed: {0}")]
    Speech(String),
}

/// `512 bytes`, `14.2 KB`, `25.0 MB`, for a sentence.
pub fn human_size(bytes: u64) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KB {
        format!("{bytes} bytes")
    } else if b < KB * KB {
        format!("{:.1} KB", b / KB)
    } else {
        format!("{:.1} MB", b / (KB * KB))
    }
}

/// `50 million`, `1.5 million`, `800000`, for a pixel count in a sentence.
fn megapixels(pixels: u64) -> String {
    if pixels < 1_000_000 {
        return pixels.to_string();
    }
    let m = pixels as f64 / 1e6;
    if m.fract() == 0.0 {
        format!("{m:.0} million")
    } else {
        format!("{m:.1} million")
    }
}
