//! A key/value table for small state that needs no table of its own (the Telegram update
//! offset, the nightly closer's done marks).
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. The SQL is
//! written once and expanded for both backends by [`kv_store_impl`]. Keys are owned by their
//! callers; nothing here interprets a value.

use async_trait::async_trait;

use super::StoreResult;

#[async_trait]
pub trait KvStore: Send + Sync {
    async fn kv_get(&self, key: &str) -> StoreResult<Option<String>>;
    async fn kv_set(&self, key: &str, value: &str) -> StoreResult<()>;
}

/// Expands `impl KvStore for $ty`; the type must have `pool` (writes) and `reader` (reads).
macro_rules! kv_store_impl {
    ($ty:ty) => {
        #[async_trait::async_trait]
        impl super::kv::KvStore for $ty {
        async fn kv_get(&self, key: &str) -> StoreResult<Option<String>> {
            let row: Option<(String,)> = sqlx::query_as("SELECT value FROM kv WHERE key = $1")
                .bind(key)
                .fetch_optional(&self.reader)
                .await?;
            Ok(row.map(|(v,)| v))
        }

        async fn kv_set(&self, key: &str, value: &str) -> StoreResult<()> {
            sqlx::query(
                "INSERT INTO kv (key, value, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            )
            .bind(key)
            .bind(value)
            .bind(now_ms())
            .execute(&self.pool)
            .await?;
            Ok(())
        }
        }
    };
}

pub(super) use kv_store_impl;
