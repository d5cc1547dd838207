//! A key/value table for small state that needs no table of its own (the Telegram update
//! offset, the nightly closer's done marks).
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import. Ordinary
//! generic code: one impl for every backend that names its pools ([`super::Pools`]), the SQL
//! written once. Keys are owned by their callers; nothing here interprets a value.

use super::db;
use async_trait::async_trait;

use super::{Pools, StoreResult};

#[async_trait]
pub trait KvStore: Send + Sync {
    async fn kv_get(&self, key: &str) -> StoreResult<Option<String>>;
    async fn kv_set(&self, key: &str, value: &str) -> StoreResult<()>;
    async fn kv_delete(&self, key: &str) -> StoreResult<()>;
}

#[async_trait]
impl<S: Pools> KvStore for S {
    async fn kv_get(&self, key: &str) -> StoreResult<Option<String>> {
        let row: Option<(String,)> = db::query("SELECT value FROM kv WHERE key = $1")
            .bind(key)
            .fetch_optional(self.reader())
            .await?;
        Ok(row.map(|(v,)| v))
    }

    async fn kv_set(&self, key: &str, value: &str) -> StoreResult<()> {
        db::query(
            "INSERT INTO kv (key, value, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(key)
        .bind(&*super::text::clean(value))
        .bind(self.now_ms())
        .execute(self.writer())
        .await?;
        Ok(())
    }

    async fn kv_delete(&self, key: &str) -> StoreResult<()> {
        db::query("DELETE FROM kv WHERE key = $1")
            .bind(key)
            .execute(self.writer())
            .await?;
        Ok(())
    }
}
