//! Named leases with fencing tokens: a lane's turn lease, a replica's liveness lease and the
//! role leases (poller, nightly closer, …) that keep one holder across replicas.
//!
//! A lease is expired rather than deleted, so its token only grows and a stale holder's writes
//! are refused. The check that fences each transcript write runs inside that write's
//! transaction (`tx.rs`), not here.
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. The SQL is
//! written once and expanded for both backends by [`lease_store_impl`], invoked in `sqlite.rs`
//! and `postgres.rs`, where the pools and the transaction helpers (`tx.rs`) live.

use std::time::Duration;

use async_trait::async_trait;

use super::types::{Lease, LeaseInfo};
use super::StoreResult;

#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Takes the named lease when it is free or expired. `None`: someone else holds it.
    async fn lease_acquire(
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

/// Expands `impl LeaseStore for $ty`; the type must have `pool` (writes) and `reader` (reads).
macro_rules! lease_store_impl {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl super::leases::LeaseStore for $ty {
        async fn lease_acquire(
            &self,
            name: &str,
            holder: &str,
            ttl: Duration,
        ) -> StoreResult<Option<Lease>> {
            let now = now_ms();
            let row: Option<(i64,)> = sqlx::query_as(common::LEASE_ACQUIRE)
                .bind(name)
                .bind(holder)
                .bind(now + ttl.as_millis() as i64)
                .bind(now)
                .fetch_optional(&self.pool)
                .await?;
            Ok(row.map(|(token,)| Lease {
                name: name.to_string(),
                holder: holder.to_string(),
                token,
            }))
        }

        async fn lease_renew(&self, lease: &Lease, ttl: Duration) -> StoreResult<()> {
            let res = sqlx::query(
                "UPDATE leases SET expires_at = $1 WHERE name = $2 AND holder = $3 AND token = $4",
            )
            .bind(now_ms() + ttl.as_millis() as i64)
            .bind(&lease.name)
            .bind(&lease.holder)
            .bind(lease.token)
            .execute(&self.pool)
            .await?;
            if res.rows_affected() == 1 {
                Ok(())
            } else {
                Err(StoreError::LeaseLost { name: lease.name.clone() })
            }
        }

        async fn lease_release(&self, lease: &Lease) -> StoreResult<()> {
            // Expire rather than delete: the fencing token must keep growing.
            sqlx::query(
                "UPDATE leases SET expires_at = 0 WHERE name = $1 AND holder = $2 AND token = $3",
            )
            .bind(&lease.name)
            .bind(&lease.holder)
            .bind(lease.token)
            .execute(&self.pool)
            .await?;
            Ok(())
        }

        async fn lease_get(&self, name: &str) -> StoreResult<Option<LeaseInfo>> {
            Ok(sqlx::query_as(
                "SELECT name, holder, token, expires_at, acquired_at FROM leases WHERE name = $1",
            )
            .bind(name)
            .fetch_optional(&self.reader)
            .await?)
        }

        async fn leases_live(&self, prefix: &str) -> StoreResult<Vec<LeaseInfo>> {
            // substr rather than LIKE: names may hold `%` or `_`.
            Ok(sqlx::query_as(
                "SELECT name, holder, token, expires_at, acquired_at FROM leases \
                 WHERE substr(name, 1, length($1)) = $1 AND expires_at > $2 ORDER BY name",
            )
            .bind(prefix)
            .bind(now_ms())
            .fetch_all(&self.reader)
            .await?)
        }
        }
    };
}

pub(super) use lease_store_impl;
