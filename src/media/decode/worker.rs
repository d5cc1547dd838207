//! `herald decode`: the isolated worker that parses what a stranger sent. The daemon starts
//! one per file (`super::Decoder`); it lowers its own limits before it reads a byte (no new
//! file or socket: the descriptor cap is the three it has; address space and CPU time as the
//! parent set them, lowered again here in case it was started by hand), reads one [`Job`],
//! decodes, writes one [`Outcome`] as JSON and exits. A stack overflow, an allocation past the
//! address-space cap or a CPU-time signal kills this process only; the parent turns the way it
//! died into a sentence.
//!
//! No tokio, no config, no store, no logging: the start stays cheap and nothing here can reach
//! the network or the daemon's data.

use std::io::{BufRead, Read, Write};
use std::process::ExitCode;

use super::image::check_image;
use super::wire::{Job, JobKind, Outcome, Refusal, WireFormat};
use crate::media::document::{decode_document, DocFormat};
use crate::media::MediaError;

/// Largest job header line read (a name and a MIME type, in JSON).
const MAX_HEADER: u64 = 16 * 1024;

/// The exit status of a worker whose input did not fit in its memory cap.
pub(super) const OUT_OF_MEMORY: u8 = 3;

/// The worker's `main`: exit 0 with an outcome on stdout, 2 for a job it could not read, or
/// [`OUT_OF_MEMORY`] for one too large for its memory cap.
pub fn main() -> ExitCode {
    // A panic is an outcome (`Malformed`), not a message on stderr.
    std::panic::set_hook(Box::new(|_| {}));
    confine();
    let mut stdin = std::io::stdin().lock();
    let Some(job) = read_header(&mut stdin) else {
        return ExitCode::from(2);
    };
    let mut bytes = Vec::with_capacity(job.len.min(64 * 1024 * 1024) as usize);
    match stdin.take(job.len).read_to_end(&mut bytes) {
        Ok(n) if n as u64 == job.len => {}
        // The file itself does not fit under the address-space cap: a memory limit, not a
        // crash (`read_to_end` reports a failed allocation instead of aborting).
        Err(e) if e.kind() == std::io::ErrorKind::OutOfMemory => {
            return ExitCode::from(OUT_OF_MEMORY)
        }
        _ => return ExitCode::from(2),
    }
    let outcome = run(&job, &bytes);
    let mut out = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut out, &outcome).is_ok() && out.flush().is_ok();
    if written {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

/// No descriptor beyond stdin, stdout and stderr (so no file and no socket); the address
/// space and CPU time no higher than the parent set (kept when they are already lower).
fn confine() {
    use rlimit::Resource;
    let _ = rlimit::setrlimit(Resource::NOFILE, 3, 3);
    let _ = rlimit::setrlimit(Resource::CORE, 0, 0);
    if let Some(mb) = env_u64("HERALD_DECODE_MEMORY_MB") {
        lower(Resource::AS, mb * 1024 * 1024);
    }
    if let Some(secs) = env_u64("HERALD_DECODE_CPU_SECS") {
        lower(Resource::CPU, secs);
    }
}

fn lower(resource: rlimit::Resource, to: u64) {
    if let Ok((soft, hard)) = rlimit::getrlimit(resource) {
        let _ = rlimit::setrlimit(resource, soft.min(to), hard.min(to.saturating_add(1)));
    }
}

fn env_u64(key: &str) -> Option<u64> {
    std::env::var(key).ok()?.parse().ok()
}

fn read_header(stdin: &mut impl BufRead) -> Option<Job> {
    let mut line = Vec::new();
    stdin.take(MAX_HEADER).read_until(b'\n', &mut line).ok()?;
    serde_json::from_slice(&line).ok()
}

/// Decodes one job in this process: what the worker runs, and what the fuzz targets and the
/// benchmark call directly. A panic in a decoder is `Malformed`.
pub fn run(job: &Job, bytes: &[u8]) -> Outcome {
    let decoded = std::panic::catch_unwind(|| decode(job, bytes));
    match decoded {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(e)) => Outcome::Refused(refusal(e)),
        Err(_) => Outcome::Refused(Refusal::Malformed {
            why: "it is malformed (the reader gave up on it)".into(),
        }),
    }
}

fn decode(job: &Job, bytes: &[u8]) -> Result<Outcome, MediaError> {
    match job.kind {
        JobKind::Image => {
            let (width, height) = check_image(bytes, job.limits.max_image_pixels)?;
            Ok(Outcome::Image { width, height })
        }
        JobKind::Html => {
            let page = String::from_utf8_lossy(bytes);
            let text = crate::media::html::to_markdown(&page);
            let total_chars = text.chars().count();
            let truncated = total_chars > job.limits.max_chars;
            let text = match text.char_indices().nth(job.limits.max_chars) {
                Some((at, _)) => text[..at].to_string(),
                None => text,
            };
            Ok(Outcome::Document {
                format: WireFormat::Markdown,
                text,
                truncated,
                total_chars,
            })
        }
        JobKind::Document => {
            let doc =
                decode_document(bytes, job.mime.as_deref(), job.name.as_deref(), &job.limits)?;
            Ok(match doc {
                Some(d) => Outcome::Document {
                    format: wire_format(d.format),
                    text: d.text,
                    truncated: d.truncated,
                    total_chars: d.total_chars,
                },
                None => Outcome::NotRead,
            })
        }
    }
}

fn wire_format(f: DocFormat) -> WireFormat {
    match f {
        DocFormat::Text => WireFormat::Text,
        DocFormat::Markdown => WireFormat::Markdown,
        DocFormat::Code(language) => WireFormat::Code(language.to_string()),
        DocFormat::Csv => WireFormat::Csv,
        DocFormat::Json => WireFormat::Json,
        DocFormat::Pdf => WireFormat::Pdf,
        DocFormat::Word => WireFormat::Word,
        DocFormat::OpenDocument => WireFormat::OpenDocument,
    }
}

fn refusal(e: MediaError) -> Refusal {
    match e {
        MediaError::Unpacked { max } => Refusal::Unpacked { max },
        MediaError::TooManyPages { pages, max } => Refusal::TooManyPages { pages, max },
        MediaError::ImageTooLarge { width, height, max } => {
            Refusal::ImageTooLarge { width, height, max }
        }
        MediaError::Corrupt(why) => Refusal::Malformed { why },
        other => Refusal::Malformed {
            why: other.to_string(),
        },
    }
}
