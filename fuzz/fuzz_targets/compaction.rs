//! The compaction projection on any transcript: the same input gives the same bytes, and the
//! result fits the budget.
#![no_main]

use herald_fuzz::{holds, invariants::check_projection, proj_messages};
use libfuzzer_sys::arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(budget) = u.int_in_range(1500usize..=20_000) else {
        return;
    };
    let Ok(previous) = u.arbitrary::<Option<String>>() else {
        return;
    };
    let Ok(msgs) = proj_messages(&mut u) else {
        return;
    };
    holds(check_projection(&msgs, previous.as_deref(), budget));
});
