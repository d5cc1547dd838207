//! The message splitter on any text and limit: every chunk within the limit and not blank;
//! without code fences, the chunks are the text in order with only whitespace dropped.
#![no_main]

use herald::adapters::split::{split_message, Measure};
use herald_fuzz::{holds, invariants::check_split};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u16, bool, &str)| {
    let (limit, utf16, text) = input;
    let limit = 16 + usize::from(limit % 600);
    let measure = if utf16 {
        Measure::Utf16
    } else {
        Measure::Chars
    };
    holds(check_split(
        text,
        limit,
        measure,
        &split_message(text, limit, measure),
    ));
});
