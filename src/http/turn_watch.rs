//! Watching one inbox row's turn from an HTTP stream: the hub's deltas for that row, until its
//! finish signal or a poll interval (the turn may run on another replica, whose deltas and
//! signal never reach this one). Both streamed answers — the web chat's events and the
//! OpenAI-compatible chunks — read the turn through it, then read the settled row from the
//! store themselves.

use std::time::Duration;

use tokio::sync::broadcast;

use crate::lanes::{StreamEvent, StreamKind};

/// How long a watch waits without a finish signal before the caller reads the store again.
const POLL: Duration = Duration::from_millis(500);

pub(super) struct TurnWatch {
    inbox_id: i64,
    deltas: broadcast::Receiver<StreamEvent>,
    finished: broadcast::Receiver<i64>,
}

impl TurnWatch {
    pub(super) fn new(
        inbox_id: i64,
        deltas: broadcast::Receiver<StreamEvent>,
        finished: broadcast::Receiver<i64>,
    ) -> TurnWatch {
        TurnWatch {
            inbox_id,
            deltas,
            finished,
        }
    }

    /// The first of this row's deltas that `take` turns into something, or `None` once the
    /// turn's finish signal came or the poll interval passed: then the caller reads the row.
    pub(super) async fn next<T>(
        &mut self,
        mut take: impl FnMut(StreamKind) -> Option<T>,
    ) -> Option<T> {
        let poll = tokio::time::sleep(POLL);
        tokio::pin!(poll);
        loop {
            tokio::select! {
                // Deltas first: the finish signal must not overtake the last of them.
                biased;
                ev = self.deltas.recv() => match ev {
                    Ok(ev) if ev.inbox_id == self.inbox_id => {
                        if let Some(t) = take(ev.kind) {
                            return Some(t);
                        }
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => {
                        self.deltas = broadcast::channel(1).1;
                    }
                },
                id = self.finished.recv() => match id {
                    Ok(id) if id == self.inbox_id => return None,
                    Ok(_) => continue,
                    Err(_) => return None,
                },
                _ = &mut poll => return None,
            }
        }
    }
}
