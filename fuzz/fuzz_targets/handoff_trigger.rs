//! The handoff trigger on any chat text: no panic, and only the bare words are accepted —
//! `handoff` in any case and dressing, `/wrapup` optionally addressed.
#![no_main]

use herald::handoff::{is_handoff_word, is_wrapup_command};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (String, Option<String>)| {
    let (text, bot) = input;
    if is_handoff_word(&text) {
        let letters: String = text
            .chars()
            .filter(|c| c.is_alphabetic())
            .flat_map(char::to_lowercase)
            .collect();
        assert_eq!(letters, "handoff", "{text:?}");
    }
    if is_wrapup_command(&text, bot.as_deref()) {
        let t = text.trim();
        assert!(
            t.get(..7)
                .is_some_and(|p| p.eq_ignore_ascii_case("/wrapup")),
            "{text:?}"
        );
        assert!(
            !t.contains(char::is_whitespace),
            "arguments accepted: {text:?}"
        );
    }
});
