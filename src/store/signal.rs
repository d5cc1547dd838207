//! Signals between replicas that share one database: "run this lane", "stop this turn",
//! "this event is finished", "this many worker slots are free here".
//!
//! They only ever speed things up. The inbox is the queue and every replica rescans it, so a
//! signal that is lost (a listener reconnecting, a replica dying with it in flight) delays work
//! by one rescan and loses nothing. On Postgres they are `NOTIFY`s on a channel named after
//! the schema, so two deployments (or two tests) on one database never hear each other. SQLite
//! has one process per database: there is nobody to tell, and nothing is sent.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{PgStore, SqliteStore, StoreResult};
use crate::domain::LaneKey;

/// What one replica tells the others. Replicas are named by their replica id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum Signal {
    /// `to` should look at the lane's inbox now (it holds the lane, or was chosen to run it).
    Wake { to: String, lane: LaneKey },
    /// Whoever runs the lane's turn cancels it (`/stop` taken in by another replica); with
    /// `only`, only a turn answering that sender (a group member's own), and the refusal
    /// answers their command's row `inbox`.
    Stop {
        lane: LaneKey,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        only: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inbox: Option<i64>,
    },
    /// The processing of this inbox event ended (answered, failed or skipped) on `from`.
    Done { from: String, inbox: i64 },
    /// `from` is alive and has `free` worker slots for more lanes.
    Slots { from: String, free: u32 },
    /// Not sent: the listener lost its connection, so signals may have been missed.
    Missed,
}

/// Signals as they arrive, including this replica's own.
pub type SignalRx = mpsc::UnboundedReceiver<Signal>;

#[async_trait]
pub trait SignalStore: Send + Sync {
    /// Whether other processes can share this database (and hear signals).
    fn signals_shared(&self) -> bool;
    /// Tells every listening replica. A no-op where [`SignalStore::signals_shared`] is false.
    async fn signal(&self, signal: &Signal) -> StoreResult<()>;
    /// Listens until `cancel`, on a task of `tracker`. `None` where nothing is shared.
    async fn listen(
        &self,
        tracker: &TaskTracker,
        cancel: CancellationToken,
    ) -> StoreResult<Option<SignalRx>>;
}

#[async_trait]
impl SignalStore for SqliteStore {
    fn signals_shared(&self) -> bool {
        false
    }

    async fn signal(&self, _signal: &Signal) -> StoreResult<()> {
        Ok(())
    }

    async fn listen(
        &self,
        _tracker: &TaskTracker,
        _cancel: CancellationToken,
    ) -> StoreResult<Option<SignalRx>> {
        Ok(None)
    }
}

/// The channel's name, computed by Postgres from the connection's schema: short enough for an
/// identifier (63 bytes), the same on every replica of one deployment.
const CHANNEL_SQL: &str = "'herald_' || left(md5(current_schema()), 16)";

#[async_trait]
impl SignalStore for PgStore {
    fn signals_shared(&self) -> bool {
        true
    }

    async fn signal(&self, signal: &Signal) -> StoreResult<()> {
        let payload = serde_json::to_string(signal).expect("a signal serializes");
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT pg_notify({CHANNEL_SQL}, $1)"
        )))
        .bind(payload)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn listen(
        &self,
        tracker: &TaskTracker,
        cancel: CancellationToken,
    ) -> StoreResult<Option<SignalRx>> {
        let (channel,): (String,) =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {CHANNEL_SQL}")))
                .fetch_one(&self.pool)
                .await?;
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.ignore_pool_close_event(true);
        listener.listen(&channel).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        tracker.spawn(async move {
            loop {
                let next = tokio::select! {
                    n = listener.try_recv() => n,
                    _ = cancel.cancelled() => return,
                };
                let signal = match next {
                    Ok(Some(n)) => match serde_json::from_str::<Signal>(n.payload()) {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::debug!(error = %e, "ignoring a signal this version cannot read");
                            continue;
                        }
                    },
                    // The connection dropped and was made again: what came meanwhile is gone.
                    Ok(None) => Signal::Missed,
                    Err(e) => {
                        tracing::warn!(error = %e, "the replica signal listener failed; retrying");
                        if crate::tasks::sleep_or_cancel(std::time::Duration::from_secs(1), &cancel)
                            .await
                            .is_err()
                        {
                            return;
                        }
                        Signal::Missed
                    }
                };
                if tx.send(signal).is_err() {
                    return;
                }
            }
        });
        Ok(Some(rx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_round_trip_as_json() {
        let lane = LaneKey::new("telegram:42");
        for s in [
            Signal::Wake {
                to: "r1".into(),
                lane: lane.clone(),
            },
            Signal::Stop {
                lane: lane.clone(),
                only: None,
                inbox: None,
            },
            Signal::Stop {
                lane,
                only: Some("2002".into()),
                inbox: Some(9),
            },
            Signal::Done {
                from: "r2".into(),
                inbox: 7,
            },
            Signal::Slots {
                from: "r2".into(),
                free: 3,
            },
        ] {
            let text = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<Signal>(&text).unwrap(), s, "{text}");
        }
    }
}
