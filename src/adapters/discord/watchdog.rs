//! The gateway watchdog: a shard that shows no sign of life is restarted, so the bot is never
//! "alive but deaf".
//!
//! serenity already reconnects when a heartbeat goes unacknowledged; this is the belt over
//! those braces for what its loop cannot see (a runner stuck in a stage, a socket that neither
//! fails nor delivers). Signs of life are the shard manager's view of each runner (latency is
//! refreshed on every heartbeat ACK, stage on every change) and every gateway event. This file
//! must not touch the connection itself: it only asks the `ShardManager` for a restart.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serenity::all::{Context, Event, RawEventHandler, ShardId, ShardManager};
use serenity::gateway::ConnectionStage;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Last gateway event per shard, fed by serenity's raw event handler.
#[derive(Default)]
pub(super) struct LifeSigns {
    last_event: Mutex<HashMap<ShardId, Instant>>,
}

impl LifeSigns {
    fn last_event(&self, shard: ShardId) -> Option<Instant> {
        self.last_event
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&shard)
            .copied()
    }
}

#[serenity::async_trait]
impl RawEventHandler for LifeSigns {
    async fn raw_event(&self, ctx: Context, _ev: Event) {
        self.last_event
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ctx.shard_id, Instant::now());
    }
}

/// What the watchdog saw of one shard at its last look.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Seen {
    pub latency: Option<Duration>,
    pub stage: ConnectionStage,
    pub alive_at: Instant,
}

/// Folds one observation into the last; returns the new state and whether the shard has been
/// silent for longer than `limit` (time to restart it). A new ACK changes the latency (it is
/// measured in nanoseconds, two equal readings in a row do not happen in practice).
pub(super) fn observe(
    prev: Option<Seen>,
    latency: Option<Duration>,
    stage: ConnectionStage,
    last_event: Option<Instant>,
    now: Instant,
    limit: Duration,
) -> (Seen, bool) {
    let mut alive_at = match prev {
        Some(p) if p.latency == latency && p.stage == stage => p.alive_at,
        _ => now,
    };
    if let Some(ev) = last_event {
        alive_at = alive_at.max(ev);
    }
    let seen = Seen {
        latency,
        stage,
        alive_at,
    };
    (seen, now.saturating_duration_since(alive_at) > limit)
}

/// Looks at every shard once per tick until cancelled.
pub(super) async fn run(
    manager: Arc<ShardManager>,
    signs: Arc<LifeSigns>,
    limit: Duration,
    cancel: CancellationToken,
) {
    let tick = (limit / 10).clamp(Duration::from_millis(200), Duration::from_secs(5));
    let mut seen: HashMap<ShardId, Seen> = HashMap::new();
    loop {
        if crate::tasks::sleep_or_cancel(tick, &cancel).await.is_err() {
            return;
        }
        let now = Instant::now();
        let snapshot: Vec<(ShardId, Option<Duration>, ConnectionStage)> = {
            let runners = manager.runners.lock().await;
            runners
                .iter()
                .map(|(id, info)| (*id, info.latency, info.stage))
                .collect()
        };
        seen.retain(|id, _| snapshot.iter().any(|(s, _, _)| s == id));
        for (id, latency, stage) in snapshot {
            let prev = seen.get(&id).copied();
            let (state, dead) = observe(prev, latency, stage, signs.last_event(id), now, limit);
            seen.insert(id, state);
            if dead && !cancel.is_cancelled() {
                tracing::warn!(shard = id.0, stage = ?stage, silent_secs = now.saturating_duration_since(state.alive_at).as_secs(),
                    "discord shard shows no sign of life; restarting it");
                metrics::counter!("herald_discord_shard_restarts_total").increment(1);
                manager.restart(id).await;
                seen.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_table() {
        let t0 = Instant::now();
        let limit = Duration::from_secs(10);
        let ms = Duration::from_millis;
        let up = ConnectionStage::Connected;
        let prev = |latency: Option<u64>, stage, alive_secs: u64| Seen {
            latency: latency.map(ms),
            stage,
            alive_at: t0 + Duration::from_secs(alive_secs),
        };
        // (what, previous, latency now, stage now, last event (secs), now (secs), restart)
        let cases = [
            ("first look", None, Some(5), up, None, 100, false),
            (
                "same ack, still within limit",
                Some(prev(Some(5), up, 95)),
                Some(5),
                up,
                None,
                100,
                false,
            ),
            (
                "no new ack for too long",
                Some(prev(Some(5), up, 80)),
                Some(5),
                up,
                None,
                100,
                true,
            ),
            (
                "a new ack is life",
                Some(prev(Some(5), up, 80)),
                Some(6),
                up,
                None,
                100,
                false,
            ),
            (
                "an event is life",
                Some(prev(Some(5), up, 80)),
                Some(5),
                up,
                Some(99),
                100,
                false,
            ),
            (
                "an old event is not",
                Some(prev(Some(5), up, 80)),
                Some(5),
                up,
                Some(85),
                100,
                true,
            ),
            (
                "stuck connecting",
                Some(prev(None, ConnectionStage::Connecting, 80)),
                None,
                ConnectionStage::Connecting,
                None,
                100,
                true,
            ),
            (
                "a stage change is life",
                Some(prev(None, ConnectionStage::Connecting, 80)),
                None,
                ConnectionStage::Handshake,
                None,
                100,
                false,
            ),
        ];
        for (what, prev, latency, stage, event, now, restart) in cases {
            let (_, dead) = observe(
                prev,
                latency.map(ms),
                stage,
                event.map(|s| t0 + Duration::from_secs(s)),
                t0 + Duration::from_secs(now),
                limit,
            );
            assert_eq!(dead, restart, "{what}");
        }
    }
}
