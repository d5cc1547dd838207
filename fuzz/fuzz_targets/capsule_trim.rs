//! The capsule trim on any text and cap: within the cap, and a head + marker + tail of the
//! input (or the input itself when it fits).
#![no_main]

use herald::handoff::trim_capsule;
use herald_fuzz::{holds, invariants::check_capsule_trim};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u16, &str)| {
    let (cap, text) = input;
    let cap = usize::from(cap % 4096);
    holds(check_capsule_trim(text, cap, &trim_capsule(text, cap)));
});
