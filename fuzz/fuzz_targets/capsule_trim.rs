//! The capsule trim on any text and cap: within the cap, and a head + marker + tail of the
//! input (or the input itself when it fits).
#![no_main]

use herald::handoff::trim_capsule;
use herald_fuzz::middle_cut_of;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u16, &str)| {
    let (cap, text) = input;
    let cap = usize::from(cap % 4096);
    let out = trim_capsule(text, cap);
    if text.chars().count() <= cap {
        assert_eq!(out, text);
        return;
    }
    assert!(
        out.chars().count() <= cap,
        "{} > {cap}",
        out.chars().count()
    );
    assert!(
        middle_cut_of(text, &out),
        "not a head + marker + tail of the input"
    );
});
