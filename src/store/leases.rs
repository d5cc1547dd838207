//! Named leases with fencing tokens: a lane's turn lease, a replica's liveness lease and the
//! role leases (poller, nightly closer, …) that keep one holder across replicas.
//!
//! A lease is expired rather than deleted, so its token only grows and a stale holder's writes
//! are refused. The check that fences each transcript write runs inside that write's
//! transaction (`tx.rs`), not here.
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. Ordinary
//! generic code: one impl for every backend that names its pools ([`super::Pools`]), the SQL
//! written once.

use std::time::Duration;

use super::db;
use async_trait::async_trait;

use super::types::{Lease, LeaseInfo};
use super::{Pools, StoreError, StoreResult};

/// A role lease's time to live (the Telegram poller, a Discord shard): short, so a dead
/// holder's role moves to a standby within [`ROLE_TAKEOVER_BOUND`].
pub const ROLE_LEASE_TTL: Duration = Duration::from_secs(3);
/// How often a role's holder renews its lease, and a standby tries to take it.
pub const ROLE_RENEW_EVERY: Duration = Duration::from_secs(1);
/// The longest a role stays without a holder after its holder died: the lease runs out, then
/// a standby's next try takes it.
pub const ROLE_TAKEOVER_BOUND: Duration = Duration::from_secs(4);
const _: () = assert!(
    ROLE_LEASE_TTL.as_millis() + ROLE_RENEW_EVERY.as_millis() <= ROLE_TAKEOVER_BOUND.as_millis()
        && ROLE_RENEW_EVERY.as_millis() * 3 <= ROLE_LEASE_TTL.as_millis()
);

#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Takes the named lease when it is free or expired. `None`: someone else holds it.
    async fn lease_acquire(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> StoreResult<Option<Lease>>;
    /// Takes the named lease from a holder whose replica is dead: the holder is
    /// `<replica id>/…` and the replica's liveness lease (`replica:<id>`) has run out, so the
    /// lease need not wait out its own, longer TTL. `None`: held by a live replica (or free:
    /// [`LeaseStore::lease_acquire`] takes that).
    async fn lease_take_from_dead(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> StoreResult<Option<Lease>>;
    async fn lease_renew(&self, lease: &Lease, ttl: Duration) -> StoreResult<()>;
    async fn lease_release(&self, lease: &Lease) -> StoreResult<()>;
    async fn lease_get(&self, name: &str) -> StoreResult<Option<LeaseInfo>>;
    /// Unexpired leases whose name starts with `prefix`, by name (live replicas, owned roles).
    async fn leases_live(&self, prefix: &str) -> StoreResult<Vec<LeaseInfo>>;
}

#[async_trait]
impl<S: Pools> LeaseStore for S {
    async fn lease_acquire(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> StoreResult<Option<Lease>> {
        let now = self.now_ms();
        let row: Option<(i64,)> = db::query(super::common::LEASE_ACQUIRE)
            .bind(name)
            .bind(holder)
            .bind(now + ttl.as_millis() as i64)
            .bind(now)
            .fetch_optional(self.writer())
            .await?;
        Ok(row.map(|(token,)| Lease {
            name: name.to_string(),
            holder: holder.to_string(),
            token,
        }))
    }

    async fn lease_take_from_dead(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> StoreResult<Option<Lease>> {
        let now = self.now_ms();
        // substr and length, not split_part/instr: the same SQL on SQLite and Postgres.
        let row: Option<(i64,)> = db::query(
            "UPDATE leases SET holder = $2, token = token + 1, expires_at = $3, acquired_at = $4 \
             WHERE name = $1 AND expires_at >= $4 AND holder <> $2 AND EXISTS ( \
               SELECT 1 FROM leases r WHERE r.name = 'replica:' || r.holder \
                 AND substr(leases.holder, 1, length(r.holder) + 1) = r.holder || '/' \
                 AND r.expires_at < $4) \
             RETURNING token",
        )
        .bind(name)
        .bind(holder)
        .bind(now + ttl.as_millis() as i64)
        .bind(now)
        .fetch_optional(self.writer())
        .await?;
        Ok(row.map(|(token,)| Lease {
            name: name.to_string(),
            holder: holder.to_string(),
            token,
        }))
    }

    async fn lease_renew(&self, lease: &Lease, ttl: Duration) -> StoreResult<()> {
        // `RETURNING` rather than `rows_affected`: the generic `QueryResult` names no count.
        let renewed: Option<(i64,)> = db::query(
            "UPDATE leases SET expires_at = $1 WHERE name = $2 AND holder = $3 AND token = $4 \
             RETURNING token",
        )
        .bind(self.now_ms() + ttl.as_millis() as i64)
        .bind(lease.name.as_str())
        .bind(lease.holder.as_str())
        .bind(lease.token)
        .fetch_optional(self.writer())
        .await?;
        if renewed.is_some() {
            Ok(())
        } else {
            Err(StoreError::LeaseLost {
                name: lease.name.clone(),
            })
        }
    }

    async fn lease_release(&self, lease: &Lease) -> StoreResult<()> {
        // Expire rather than delete: the fencing token must keep growing.
        db::query(
            "UPDATE leases SET expires_at = 0 WHERE name = $1 AND holder = $2 AND token = $3",
        )
        .bind(lease.name.as_str())
        .bind(lease.holder.as_str())
        .bind(lease.token)
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn lease_get(&self, name: &str) -> StoreResult<Option<LeaseInfo>> {
        Ok(db::query(
            "SELECT name, holder, token, expires_at, acquired_at FROM leases WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(self.reader())
        .await?)
    }

    async fn leases_live(&self, prefix: &str) -> StoreResult<Vec<LeaseInfo>> {
        // substr rather than LIKE: names may hold `%` or `_`.
        Ok(db::query(
            "SELECT name, holder, token, expires_at, acquired_at FROM leases \
             WHERE substr(name, 1, length($1)) = $1 AND expires_at > $2 ORDER BY name",
        )
        .bind(prefix)
        .bind(self.now_ms())
        .fetch_all(self.reader())
        .await?)
    }
}
