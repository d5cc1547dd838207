//! A test-only fault hook: the turn for one exact message text panics, once, inside the lane
//! worker (after the turn started and its typing task runs), like a bug in a turn would.
//!
//! It exists so the end-to-end tests can prove that a panicking turn does not pin its lane.
//! Nothing in the daemon arms it; an unarmed hook costs one relaxed atomic load per turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static ARMED: AtomicBool = AtomicBool::new(false);
static PANIC_ON: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Makes the next turn whose user text is exactly `text` panic (once). For tests only.
#[doc(hidden)]
pub fn panic_once_on(text: &str) {
    PANIC_ON
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(text.to_string());
    ARMED.store(true, Ordering::SeqCst);
}

/// Panics when `text` was armed by [`panic_once_on`].
pub(super) fn check(text: &str) {
    if !ARMED.load(Ordering::Relaxed) {
        return;
    }
    let hit = {
        let mut armed = PANIC_ON.lock().unwrap_or_else(|e| e.into_inner());
        let hit = armed
            .iter()
            .position(|t| t == text)
            .map(|i| armed.remove(i));
        ARMED.store(!armed.is_empty(), Ordering::SeqCst);
        hit
    };
    if hit.is_some() {
        panic!("fault hook: a turn panicked on purpose ({text:?})");
    }
}
