//! The streaming seam: where a provider's partial answer goes while it is being written.
//!
//! A [`DeltaSink`] is display state only. What a provider returns from `chat_stream` is the
//! whole answer, exactly as `chat` would return it; the sink just sees it early. A failed
//! attempt may have shown text already, so the chain calls [`DeltaSink::restart`] before every
//! retry or fallback: a preview never shows a failed attempt's half answer joined to the next.
//! Reasoning deltas go to [`DeltaSink::reasoning`] and never into the returned content.

/// Receives the text of an answer as it is written.
pub trait DeltaSink: Send + Sync {
    /// More answer text, to append to what was shown since the last restart.
    fn text(&self, delta: &str);
    /// More reasoning ("thinking") text; never part of the answer or the transcript.
    fn reasoning(&self, _delta: &str) {}
    /// Forget everything shown since the last restart: a new attempt (or, in the agent loop, a
    /// new model call after tool calls) starts from nothing.
    fn restart(&self);
}

/// A sink that drops everything (the non-streaming callers).
pub struct NoSink;

impl DeltaSink for NoSink {
    fn text(&self, _delta: &str) {}
    fn restart(&self) {}
}

#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Mutex;

    use super::DeltaSink;

    /// Records what a sink was told, for unit tests.
    #[derive(Default)]
    pub struct Recording {
        pub text: Mutex<String>,
        pub reasoning: Mutex<String>,
        pub restarts: Mutex<u32>,
    }

    impl DeltaSink for Recording {
        fn text(&self, delta: &str) {
            self.text.lock().unwrap().push_str(delta);
        }
        fn reasoning(&self, delta: &str) {
            self.reasoning.lock().unwrap().push_str(delta);
        }
        fn restart(&self) {
            self.text.lock().unwrap().clear();
            *self.restarts.lock().unwrap() += 1;
        }
    }
}
