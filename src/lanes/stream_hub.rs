//! The in-process hub of live answer text: every streamed turn publishes its deltas here,
//! tagged with its inbox id, and the web chat's server-sent events read them back.
//!
//! One broadcast for the process, filtered by inbox id on the reading side; nothing is kept:
//! a reader sees what is published after it subscribed. Display state only — the reply a
//! reader ends with is the committed one, read from the store.

use tokio::sync::broadcast;

/// What a streamed turn showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamKind {
    /// More answer text.
    Text(String),
    /// More reasoning text (only published when `streaming.show_reasoning` is on).
    Reasoning(String),
    /// Forget the text so far: a retry, or a new model call after tool calls.
    Restart,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEvent {
    pub inbox_id: i64,
    pub kind: StreamKind,
}

#[derive(Clone)]
pub struct StreamHub(broadcast::Sender<StreamEvent>);

impl Default for StreamHub {
    fn default() -> Self {
        StreamHub(broadcast::channel(4096).0)
    }
}

impl StreamHub {
    pub fn subscribe(&self) -> broadcast::Receiver<StreamEvent> {
        self.0.subscribe()
    }

    pub(super) fn publish(&self, inbox_id: i64, kind: StreamKind) {
        // Nobody listening is the normal case for chat platforms.
        if self.0.receiver_count() > 0 {
            let _ = self.0.send(StreamEvent { inbox_id, kind });
        }
    }
}
