//! Hostile text that got through a projection: escapes, controls, invisible characters,
//! chat-template markers and headings the projector did not write. Any count above zero means
//! a quoted tool output could steer the model that rereads the projection.

use serde::Serialize;

use super::score::HEADINGS;

#[derive(Debug, Default, Clone, Serialize)]
pub struct Residue {
    pub escapes: usize,
    /// C0 and C1 control characters other than `\n` (ESC counted above).
    pub controls: usize,
    /// Bidi overrides, zero-width characters, Unicode line separators.
    pub invisible: usize,
    /// Unbroken chat-template markers: `<|`, `[INST]`, `<<SYS>>`, `<think>`, …
    pub markers: usize,
    /// Lines starting with `#` other than the six headings, each at most once and in order.
    pub stray_headings: usize,
}

impl Residue {
    pub fn total(&self) -> usize {
        self.escapes + self.controls + self.invisible + self.markers + self.stray_headings
    }
}

/// Hostile text that survived into `projection`.
pub fn residue(projection: &str) -> Residue {
    let mut r = Residue::default();
    for c in projection.chars() {
        match c {
            '\u{1b}' => r.escapes += 1,
            '\n' => {}
            c if c.is_control() => r.controls += 1,
            '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{FEFF}'
            | '\u{00AD}' => r.invisible += 1,
            _ => {}
        }
    }
    let lower = projection.to_lowercase();
    for marker in [
        "<|", "<｜", "[inst]", "[/inst]", "<<sys>>", "<</sys>>", "<s>", "</s>", "<think>",
        "</think>",
    ] {
        r.markers += lower.matches(marker).count();
    }
    let mut next_heading = 0;
    for line in projection.lines().filter(|l| l.starts_with('#')) {
        // A heading is the projector's only once, and only after the ones before it.
        match HEADINGS[next_heading..].iter().position(|h| *h == line) {
            Some(p) => next_heading += p + 1,
            None => r.stray_headings += 1,
        }
    }
    r
}
