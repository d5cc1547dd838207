//! Platform adapters: the only place platform crates (teloxide, serenity) appear. Each turns
//! platform updates into `MessageEvent`s and registers an `Outbound` for its replies.

pub mod discord;
pub mod split;
pub mod telegram;
pub mod web;

use std::sync::Arc;

use crate::config::Config;
use crate::lanes::{Approvals, Ingest};
use crate::store::Store;

/// What an adapter gets of the core when it starts, and nothing more: the inbox handle, the
/// store for its own leases and offsets (poller role, shard leases), this replica's name and
/// the configuration (lease timing, authorization).
#[derive(Clone)]
pub struct Edge {
    pub ingest: Ingest,
    /// Where approval button presses go.
    pub approvals: Approvals,
    pub store: Arc<dyn Store>,
    pub replica_id: String,
    pub config: Arc<Config>,
}
