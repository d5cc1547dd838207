//! The decode worker's document path (`herald decode`'s own function, in process) on any
//! bytes under any of the names it dispatches on: it returns an outcome (text, not read, or a
//! refusal) within the character budget. libFuzzer's panic hook aborts on any panic, so a
//! panic in a decoder is a finding here although the worker would answer "malformed"; so is a
//! stack overflow or a hang, which the worker would survive as a crash or a timeout.
#![no_main]

use herald::media::decode::worker::run;
use herald::media::decode::{Job, JobKind, Limits, Outcome};
use libfuzzer_sys::fuzz_target;

const NAMES: &[(Option<&str>, Option<&str>)] = &[
    (Some("a.pdf"), Some("application/pdf")),
    (Some("a.docx"), None),
    (Some("a.odt"), None),
    (Some("a.txt"), Some("text/plain")),
    (None, None),
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let (name, mime) = NAMES[usize::from(pick) % NAMES.len()];
    let limits = Limits {
        max_unpacked_bytes: 4 * 1024 * 1024,
        max_pages: 50,
        max_image_pixels: 50_000_000,
        max_chars: 2_000,
    };
    let job = Job {
        kind: JobKind::Document,
        mime: mime.map(str::to_string),
        name: name.map(str::to_string),
        limits,
        len: bytes.len() as u64,
    };
    if let Outcome::Document { text, .. } = run(&job, bytes) {
        assert!(text.chars().count() <= limits.max_chars, "invariant broken: text over budget");
    }
});
