//! The lane key from any raw conversation id: bounded, clean, short clean keys kept as they
//! are, and a clean key parses to itself.
#![no_main]

use herald_fuzz::{holds, invariants::check_lane_key};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &str| {
    holds(check_lane_key(raw));
});
