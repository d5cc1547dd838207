//! The decode worker's image path on any bytes: an image within the pixel cap is its header's
//! size, anything else is a refusal; never a panic, and never a size over the cap.
#![no_main]

use herald::media::decode::worker::run;
use herald::media::decode::{Job, JobKind, Limits, Outcome};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_image_pixels: 1_000_000,
        ..Limits::default()
    };
    let job = Job {
        kind: JobKind::Image,
        mime: None,
        name: None,
        limits,
        len: data.len() as u64,
    };
    if let Outcome::Image { width, height } = run(&job, data) {
        assert!(
            width.saturating_mul(height) <= limits.max_image_pixels,
            "invariant broken: {width}x{height} passed the cap"
        );
    }
});
