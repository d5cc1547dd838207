//! The one capability the edges of the daemon get: write an event to the inbox and wake its
//! lane.
//!
//! Adapters, the cron scheduler, the handoff builder and the HTTP handlers hold an [`Ingest`],
//! never the router: they cannot reach its workers, its dependencies or each other through
//! it. The wake travels over a channel the router drains, so an `Ingest` exists before the
//! router does — the handoff builder, which the router's own hooks hold, needs no back link.

use std::sync::Arc;

use tokio::sync::{broadcast, mpsc};

use super::commands::{parse_command, Command};
use crate::domain::{LaneKey, MessageEvent};
use crate::hooks::Authorizer;
use crate::store::{InboxInsert, Store, StoreError};

/// What the router is asked to do.
#[derive(Debug)]
pub(super) enum Wake {
    /// Look at this lane's inbox soon.
    Lane(LaneKey),
    /// Cancel this lane's running turn (`/stop`) wherever it runs: any turn, or only the
    /// turn of a group member who is not an admin ([`OwnStop`]).
    StopTurn(LaneKey, Option<OwnStop>),
    /// Answer this `/status` event (an inbox id) now, beside whatever turn runs.
    Status(LaneKey, i64),
}

/// A group member's `/stop`: it stops only a turn answering their own message. Its command row
/// (`inbox`; unknown in a signal from an older replica) is answered at once with the refusal
/// when another member's turn runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OwnStop {
    pub(super) sender: String,
    pub(super) inbox: Option<i64>,
}

/// The receiving end, handed to [`super::LaneRouter::new`].
pub struct Wakes(pub(super) mpsc::UnboundedReceiver<Wake>);

#[derive(Clone)]
pub struct Ingest {
    store: Arc<dyn Store>,
    auth: Authorizer,
    wakes: mpsc::UnboundedSender<Wake>,
    finished: broadcast::Sender<i64>,
}

impl Ingest {
    /// A handle and the wake channel's receiving end. `finished` carries the ids of inbox
    /// events whose processing ended (answered, failed or skipped).
    pub fn new(
        store: Arc<dyn Store>,
        auth: Authorizer,
        finished: broadcast::Sender<i64>,
    ) -> (Ingest, Wakes) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Ingest {
                store,
                auth,
                wakes: tx,
                finished,
            },
            Wakes(rx),
        )
    }

    /// Writes an inbound event to the inbox and wakes its lane. The caller may acknowledge the
    /// platform once this returns `Ok`.
    pub async fn ingest(&self, ev: &MessageEvent) -> Result<InboxInsert, StoreError> {
        let lane = ev.lane();
        // `/stop` and `/status` act before the worker's auth hook runs: check the sender the
        // same way here (a refused sender's command is recorded below and dropped by the hook,
        // never run).
        let mut cmd = parse_command(&ev.text, None)
            .filter(|c| !ev.is_internal() && matches!(c, Command::Stop | Command::Status));
        if cmd.is_some() && !self.auth.is_allowed_or_paired(ev, &*self.store).await {
            cmd = None;
        }
        // In a group a member stops only their own turn, an admin any: that wake names the
        // command's row, so it goes once the row is written.
        let own = cmd == Some(Command::Stop) && Authorizer::in_group(ev) && !self.auth.is_admin(ev);
        if cmd == Some(Command::Stop) && !own {
            let _ = self.wakes.send(Wake::StopTurn(lane.clone(), None));
        }
        let res = self.store.inbox_insert(ev).await?;
        if own {
            let stop = OwnStop {
                sender: ev.sender_id.clone(),
                inbox: Some(res.id()),
            };
            let _ = self.wakes.send(Wake::StopTurn(lane.clone(), Some(stop)));
        }
        metrics::counter!("herald_inbound_events_total", "platform" => ev.platform.to_string(),
            "outcome" => if matches!(res, InboxInsert::Inserted(_)) { "new" } else { "duplicate" })
        .increment(1);
        // A closed channel means the router is shutting down; the rescan of the next start
        // (or another replica) picks the event up from the inbox.
        // A new `/status` is answered at once, not behind the lane's running turn; its row
        // stays pending until then, so a lost wake leaves it to the worker (answered once: the
        // reply's outbox key is the same either way).
        let wake = match (cmd, &res) {
            (Some(Command::Status), InboxInsert::Inserted(id)) => Wake::Status(lane, *id),
            _ => Wake::Lane(lane),
        };
        let _ = self.wakes.send(wake);
        Ok(res)
    }

    /// Ids of inbox events as their processing ends; subscribe before ingesting to wait for one.
    pub fn subscribe_finished(&self) -> broadcast::Receiver<i64> {
        self.finished.subscribe()
    }
}
