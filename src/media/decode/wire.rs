//! What the daemon and its `herald decode` worker say to each other: one [`Job`] header as a
//! JSON line on the worker's stdin, followed by exactly `len` bytes of the file; one
//! [`Outcome`] as JSON on its stdout. Plain data, so the parent never trusts more than a
//! small, capped JSON answer from the process that touched the bytes.

use serde::{Deserialize, Serialize};

/// Which decoder a job goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    /// A document: its text (PDF, office, plain text and code).
    Document,
    /// An image: only its header's dimensions, checked against the pixel cap.
    Image,
    /// A web page (`web_fetch`): its main content as Markdown, cut at `max_chars`.
    Html,
}

/// The caps a decoder works under, from `[media]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Bytes a decoder may inflate in all (PDF streams, zip entries).
    pub max_unpacked_bytes: u64,
    pub max_pages: u64,
    pub max_image_pixels: u64,
    /// Characters of a document's text kept.
    pub max_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_unpacked_bytes: 64 * 1024 * 1024,
            max_pages: 500,
            max_image_pixels: 50_000_000,
            max_chars: 40_000,
        }
    }
}

/// The header line of a job; the file's bytes follow it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub kind: JobKind,
    pub mime: Option<String>,
    pub name: Option<String>,
    pub limits: Limits,
    /// How many bytes follow the header line.
    pub len: u64,
}

/// What a decoder made of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// A document's text, cut at `max_chars` (`total_chars` before the cut).
    Document {
        format: WireFormat,
        text: String,
        truncated: bool,
        total_chars: usize,
    },
    /// A type Herald does not read.
    NotRead,
    /// An image within the pixel cap.
    Image { width: u64, height: u64 },
    /// The file was refused, with why.
    Refused(Refusal),
}

/// A document format on the wire (`DocFormat` holds `&'static str` languages).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireFormat {
    Text,
    Markdown,
    Code(String),
    Csv,
    Json,
    Pdf,
    Word,
    OpenDocument,
}

/// Why a decoder refused a file; each becomes one `MediaError` sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum Refusal {
    /// The bytes do not parse as what they claim to be.
    Malformed {
        why: String,
    },
    /// Inflating it would pass `max_unpacked_bytes`.
    Unpacked {
        max: u64,
    },
    TooManyPages {
        pages: u64,
        max: u64,
    },
    ImageTooLarge {
        width: u64,
        height: u64,
        max: u64,
    },
}
