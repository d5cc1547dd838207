//! The schema's migrations, applied and listed the same way on both backends: each backend
//! ships its own embedded `Migrator` (its SQL differs) and names it through
//! [`super::Pools::migrator`]; everything else is written once here.
//!
//! A supertrait of [`super::Store`], so calls on `dyn Store` need no extra import.

use std::collections::HashSet;

use async_trait::async_trait;

use super::db;
use super::types::MigrationInfo;
use super::{common, Pools, StoreError, StoreResult};

#[async_trait]
pub trait MigrationStore: Send + Sync {
    /// Applies every pending migration.
    async fn migrate(&self) -> StoreResult<()>;
    /// Migrations shipped in this binary and not yet applied, oldest first (all of them on an
    /// empty database).
    async fn migrations_pending(&self) -> StoreResult<Vec<MigrationInfo>>;
    /// Versions applied to the database that this binary does not ship (a newer release
    /// migrated it), oldest first. `migrate` and `migrate_to` refuse such a database.
    async fn migrations_unknown(&self) -> StoreResult<Vec<i64>>;
    /// Applies pending migrations up to and including `version`.
    async fn migrate_to(&self, version: i64) -> StoreResult<()>;
    /// Reachable and fully migrated.
    async fn ready(&self) -> StoreResult<bool>;
}

#[async_trait]
impl<S: Pools> MigrationStore for S {
    async fn migrate(&self) -> StoreResult<()> {
        common::refuse_unknown(self.migrations_unknown().await?)?;
        self.writer()
            .migrate(self.migrator(), None)
            .await
            .map_err(|e| StoreError::other_from(format!("migration failed: {e}"), e))
    }

    async fn migrations_pending(&self) -> StoreResult<Vec<MigrationInfo>> {
        let applied = applied_versions(self).await?;
        Ok(self
            .migrator()
            .iter()
            .filter(|m| !m.migration_type.is_down_migration() && !applied.contains(&m.version))
            .map(|m| MigrationInfo {
                version: m.version,
                description: m.description.to_string(),
            })
            .collect())
    }

    async fn migrations_unknown(&self) -> StoreResult<Vec<i64>> {
        let migrator = self.migrator();
        let mut unknown: Vec<i64> = applied_versions(self)
            .await?
            .into_iter()
            .filter(|v| !migrator.iter().any(|m| m.version == *v))
            .collect();
        unknown.sort_unstable();
        Ok(unknown)
    }

    async fn migrate_to(&self, version: i64) -> StoreResult<()> {
        common::refuse_unknown(self.migrations_unknown().await?)?;
        self.writer()
            .migrate(self.migrator(), Some(version))
            .await
            .map_err(|e| StoreError::other_from(format!("migration {version} failed: {e}"), e))
    }

    async fn ready(&self) -> StoreResult<bool> {
        Ok(self.migrations_pending().await?.is_empty())
    }
}

/// Versions recorded as applied in `_sqlx_migrations` (none when the table does not exist
/// yet: a database nothing was applied to).
async fn applied_versions<S: Pools>(store: &S) -> StoreResult<HashSet<i64>> {
    let rows: StoreResult<Vec<(i64,)>> =
        db::query("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(store.reader())
            .await;
    match rows {
        Ok(rows) => Ok(rows.into_iter().map(|(v,)| v).collect()),
        Err(e) if db::refused_by_database(&e) => Ok(HashSet::new()),
        Err(e) => Err(e),
    }
}
