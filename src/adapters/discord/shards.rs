//! Which gateway shards this replica runs: each shard `n` belongs to whoever holds the store
//! lease `role:discord-shard-<n>`, and a replica takes no more than its fair share.
//!
//! The fair share is `ceil(total / live replicas)` (live = unexpired `replica:*` leases), capped
//! by `discord.max_shards_per_replica`. A replica above its share (another one joined) gives a
//! shard back; a replica below it takes a free or expired shard lease, at most one every 5 s
//! (Discord's spacing between IDENTIFYs). Shard leases are role leases (`store::ROLE_LEASE_TTL`,
//! renewed every second), so a dead replica's shard moves within seconds. A shard's connection is stopped before its lease
//! is released, and stopped on its own when the lease cannot be renewed for long enough that
//! it might expire: two replicas are never connected as one shard for longer than a renewal.
//!
//! Must not: run a shard without holding its lease, or decide anything about messages (the
//! inbox dedups by message id, so an event seen by two sessions during a handover is stored
//! once).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::super::Edge;
use crate::config::{DiscordConfig, ShardCount};
use crate::store::{Lease, Store, StoreError};
use crate::tasks::Backoff;

pub const SHARD_LEASE_PREFIX: &str = "role:discord-shard-";
const REPLICA_LEASE_PREFIX: &str = "replica:";
/// A role lease: short, so a dead replica's shard moves within `ROLE_TAKEOVER_BOUND`.
const LEASE_TTL: Duration = crate::store::ROLE_LEASE_TTL;
/// Renewal, rebalancing and takeover period.
const TICK: Duration = crate::store::ROLE_RENEW_EVERY;
/// Discord's spacing between IDENTIFYs: this replica starts at most one shard this often.
const IDENTIFY_EVERY: Duration = Duration::from_secs(5);
/// A shard whose lease went unrenewed this long is stopped: a tick before it could expire.
const FENCE_AFTER: Duration = LEASE_TTL.saturating_sub(TICK);
/// How long a stopping shard may take to close its socket before its lease is let go anyway.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// How many shards one replica should run.
pub(super) fn fair_share(total: u32, live_replicas: usize, cap: u32) -> u32 {
    let live = u32::try_from(live_replicas.max(1)).unwrap_or(u32::MAX);
    let share = total.div_ceil(live);
    if cap > 0 {
        share.min(cap)
    } else {
        share
    }
}

fn lease_name(shard: u32) -> String {
    format!("{SHARD_LEASE_PREFIX}{shard}")
}

struct Owned {
    lease: Lease,
    stop: CancellationToken,
    task: JoinHandle<()>,
    renewed: Instant,
}

pub(super) struct Owner {
    pub config: DiscordConfig,
    pub edge: Edge,
    pub tracker: TaskTracker,
    pub holder: String,
    pub interactions: Arc<super::interactions::InteractionTokens>,
}

impl Owner {
    fn store(&self) -> &Arc<dyn Store> {
        &self.edge.store
    }

    /// Resolves the shard count, then keeps this replica's share of shards running until
    /// `cancel`, when every owned shard is stopped and its lease released.
    pub async fn run(self, cancel: CancellationToken) {
        let Some(total) = self.total(&cancel).await else {
            return;
        };
        tracing::info!(total, holder = %self.holder, "discord shards: taking this replica's share");
        let mut owned: BTreeMap<u32, Owned> = BTreeMap::new();
        let mut identified: Option<Instant> = None;
        loop {
            self.renew(&mut owned).await;
            match self.store().leases_live(REPLICA_LEASE_PREFIX).await {
                Ok(replicas) => {
                    let share =
                        fair_share(total, replicas.len(), self.config.max_shards_per_replica);
                    let may_start = identified.is_none_or(|at| at.elapsed() >= IDENTIFY_EVERY);
                    if self.rebalance(&mut owned, total, share, may_start).await {
                        identified = Some(Instant::now());
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot count live replicas; shards unchanged")
                }
            }
            metrics::gauge!("herald_discord_shards_owned").set(owned.len() as f64);
            if crate::tasks::sleep_or_cancel(TICK, &cancel).await.is_err() {
                break;
            }
        }
        for (shard, o) in std::mem::take(&mut owned) {
            self.give_back(shard, o).await;
        }
        metrics::gauge!("herald_discord_shards_owned").set(0.0);
    }

    /// The configured count, or Discord's recommendation (retried until it answers).
    async fn total(&self, cancel: &CancellationToken) -> Option<u32> {
        if let ShardCount::Fixed(n) = self.config.shards {
            return Some(n);
        }
        let http = match super::build_http(&self.config) {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(error = %e, "discord adapter stopped; Discord messages will not be received");
                return None;
            }
        };
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            match http.get_bot_gateway().await {
                Ok(g) => return Some(g.shards.max(1)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read Discord's recommended shard count; retrying")
                }
            }
            backoff.wait(cancel).await.ok()?;
        }
    }

    /// Renews every owned lease; a lost lease, or one unrenewed for too long, stops its shard.
    async fn renew(&self, owned: &mut BTreeMap<u32, Owned>) {
        let mut drop = Vec::new();
        for (shard, o) in owned.iter_mut() {
            match self.store().lease_renew(&o.lease, LEASE_TTL).await {
                Ok(()) => o.renewed = Instant::now(),
                Err(StoreError::LeaseLost { .. }) => {
                    tracing::warn!(
                        shard,
                        "lost the discord shard lease; disconnecting the shard here"
                    );
                    drop.push(*shard);
                }
                Err(e) if o.renewed.elapsed() >= FENCE_AFTER => {
                    tracing::warn!(shard, error = %e, "cannot renew the discord shard lease before it may expire; disconnecting the shard here");
                    drop.push(*shard);
                }
                Err(e) => {
                    tracing::warn!(shard, error = %e, "discord shard lease renewal failed; retrying")
                }
            }
        }
        for shard in drop {
            if let Some(o) = owned.remove(&shard) {
                o.stop.cancel();
                // The lease is someone else's now (or about to be): nothing to release.
                let _ = tokio::time::timeout(STOP_WAIT, o.task).await;
            }
        }
    }

    /// Gives back shards above `share`, or takes one free shard when below it and `may_start`;
    /// true when it started one.
    async fn rebalance(
        &self,
        owned: &mut BTreeMap<u32, Owned>,
        total: u32,
        share: u32,
        may_start: bool,
    ) -> bool {
        let count = u32::try_from(owned.len()).unwrap_or(u32::MAX);
        if count > share {
            if let Some((shard, o)) = owned.pop_last() {
                tracing::info!(
                    shard,
                    share,
                    "discord shards: giving a shard back to another replica"
                );
                self.give_back(shard, o).await;
            }
            return false;
        }
        if count == share || !may_start {
            return false;
        }
        for shard in (0..total).filter(|s| !owned.contains_key(s)) {
            match self
                .store()
                .lease_acquire(&lease_name(shard), &self.holder, LEASE_TTL)
                .await
            {
                Ok(Some(lease)) => {
                    tracing::info!(shard, total, "discord shards: this replica now runs shard");
                    let stop = CancellationToken::new();
                    let task = self.tracker.spawn(super::run(
                        self.config.clone(),
                        self.edge.clone(),
                        self.tracker.clone(),
                        stop.clone(),
                        (shard, total),
                        self.interactions.clone(),
                    ));
                    owned.insert(
                        shard,
                        Owned {
                            lease,
                            stop,
                            task,
                            renewed: Instant::now(),
                        },
                    );
                    return true;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(shard, error = %e, "cannot take a discord shard lease; retrying");
                    return false;
                }
            }
        }
        false
    }

    /// Disconnects the shard, then lets its lease go so another replica can take it at once.
    async fn give_back(&self, shard: u32, o: Owned) {
        o.stop.cancel();
        if tokio::time::timeout(STOP_WAIT, o.task).await.is_err() {
            tracing::warn!(
                shard,
                "discord shard did not stop in time; its lease is kept to expire"
            );
            return;
        }
        if let Err(e) = self.store().lease_release(&o.lease).await {
            tracing::warn!(shard, error = %e, "discord shard lease release failed; it will expire");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fair_share;

    #[test]
    fn fair_share_splits_shards_across_live_replicas() {
        // (total, live replicas, cap, share)
        let cases = [
            (1, 1, 0, 1),
            (2, 1, 0, 2),
            (2, 2, 0, 1),
            (3, 2, 0, 2),
            (2, 3, 0, 1),
            (16, 3, 0, 6),
            (16, 3, 4, 4),
            (2, 0, 0, 2), // own replica lease not visible yet: count itself
            (4, 1, 1, 1),
        ];
        for (total, live, cap, want) in cases {
            assert_eq!(
                fair_share(total, live, cap),
                want,
                "total {total}, live {live}, cap {cap}"
            );
        }
    }
}
