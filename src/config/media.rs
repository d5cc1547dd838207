//! The `[media]` section: how large a file Herald fetches, how long its bytes stay cached,
//! how voice notes become text, how much of a document reaches the model, and the caps of the
//! isolated decoder that reads a stranger's files.
//!
//! Only settings live here; reading files is `crate::media`'s job.

use serde::{Deserialize, Serialize};

use super::ConfigUrl;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MediaConfig {
    /// Largest file fetched from a platform, in bytes; a larger one gets a clear answer.
    pub max_bytes: u64,
    /// A fetch that takes longer than this many seconds fails with a clear answer.
    pub fetch_timeout_secs: u64,
    /// Images stay in the model's view for this many turns after the one that brought them;
    /// older ones become a one-line placeholder.
    pub keep_images_turns: u32,
    /// Fetched bytes are kept under `<data_dir>/media` for this many hours (0: not cached).
    pub cache_hours: u64,
    /// Speech-to-text endpoint (OpenAI-compatible `POST <url>/audio/transcriptions`); unset:
    /// the model's `base_url`.
    pub transcription_url: Option<ConfigUrl>,
    pub transcription_model: String,
    /// Characters of a document's text given to the model; the rest is cut with a note.
    pub document_chars: usize,
    /// Hosts (`name` or `name:port`) a file may be fetched from although they resolve to a
    /// private, loopback or other internal address. The configured platform API hosts
    /// (`telegram.api_url`, `discord.api_url`) are reached that way without being listed.
    pub allow_private_hosts: Vec<String>,
    /// Files from people are decoded in a `herald decode` child process: its address space
    /// cap in MB; a file that needs more gets a clear answer.
    pub decode_memory_mb: u64,
    /// Wall-clock (and CPU-time) deadline of one decode, in seconds.
    pub decode_timeout_secs: u64,
    /// Bytes a document may inflate to in all (PDF streams, office zip entries).
    pub max_unpacked_bytes: u64,
    /// Pages of a PDF read at most; a longer one is refused.
    pub max_pages: u64,
    /// Width times height of an image given to the model at most; a larger one is refused.
    pub max_image_pixels: u64,
}

impl Default for MediaConfig {
    fn default() -> Self {
        MediaConfig {
            max_bytes: 20 * 1024 * 1024,
            fetch_timeout_secs: 60,
            keep_images_turns: 3,
            cache_hours: 24,
            transcription_url: None,
            transcription_model: "whisper-1".into(),
            document_chars: 40_000,
            allow_private_hosts: Vec::new(),
            decode_memory_mb: 512,
            decode_timeout_secs: 20,
            max_unpacked_bytes: 64 * 1024 * 1024,
            max_pages: 500,
            max_image_pixels: 50_000_000,
        }
    }
}
