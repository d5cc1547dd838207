//! The handoff trigger on any chat text: no panic, and only the bare words are accepted —
//! `handoff` in any case and dressing, `/wrapup` optionally addressed.
#![no_main]

use herald_fuzz::{holds, invariants::check_handoff_trigger};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (String, Option<String>)| {
    let (text, bot) = input;
    holds(check_handoff_trigger(&text, bot.as_deref()));
});
