//! The message splitter on any text and limit: every chunk within the limit and not blank;
//! without code fences, the chunks are the text in order with only whitespace dropped.
#![no_main]

use herald::adapters::split::{split_message, Measure};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u16, bool, &str)| {
    let (limit, utf16, text) = input;
    let limit = 16 + usize::from(limit % 600);
    let measure = if utf16 {
        Measure::Utf16
    } else {
        Measure::Chars
    };
    let chunks = split_message(text, limit, measure);
    for c in &chunks {
        assert!(
            measure.len(c) <= limit,
            "chunk of {} > {limit}",
            measure.len(c)
        );
        assert!(!c.trim().is_empty(), "whitespace-only chunk");
    }
    if text.contains('`') {
        return;
    }
    let mut pos = 0;
    for c in &chunks {
        let at = text[pos..]
            .find(c.as_str())
            .unwrap_or_else(|| panic!("chunk {c:?} not found in order"));
        assert!(
            text[pos..pos + at].trim().is_empty(),
            "content dropped before {c:?}"
        );
        pos += at + c.len();
    }
    assert!(text[pos..].trim().is_empty(), "content dropped at the end");
});
