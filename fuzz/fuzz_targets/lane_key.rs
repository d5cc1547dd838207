//! The lane key from any raw conversation id: bounded, clean, short clean keys kept as they
//! are, and a clean key parses to itself.
#![no_main]

use herald::domain::{LaneKey, MAX_LANE_KEY_LEN};
use herald_fuzz::is_lane_char;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|raw: &str| {
    let key = LaneKey::new(raw);
    let s = key.as_str();
    assert!(
        s.chars().count() <= MAX_LANE_KEY_LEN,
        "{} chars",
        s.chars().count()
    );
    assert!(s.chars().all(is_lane_char), "{s:?}");
    if raw.chars().count() <= MAX_LANE_KEY_LEN && raw.chars().all(is_lane_char) {
        assert_eq!(s, raw);
    }
    assert_eq!(
        LaneKey::parse(s).as_str(),
        s,
        "a clean key parses to itself"
    );
});
