//! Matrix adapter: matrix-sdk (the ecosystem's SDK) with its SQLite state and crypto store
//! under `<data_dir>/matrix/`, `/sync` long-polling in, `m.room.message` out, end-to-end
//! encryption from the start (Element's direct chats are encrypted by default).
//!
//! `app` sees it as an [`Adapter`]: `from_config` (no network; `None` without
//! `matrix.user_id`), `outbound` (sends once the client has logged in), `pace`, and `spawn`
//! (build the client, log in or restore the session, then the sync loop, tracked and
//! cancellable). Matrix has no buttons: approvals are asked in words and answered by a reply
//! or a reaction (`receive.rs`).
//!
//! Must not: log a token, the password or what people wrote; store a sync token before its
//! batch is in the inbox.

pub mod config;
mod doctor;
mod format;
mod gap;
pub mod inbound;
mod outbound;
mod receive;
mod session;
pub mod spec;
mod sync;

#[cfg(test)]
mod inbound_tests;

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Adapter, Edge};
use crate::config::Config;
use crate::delivery::Outbound;
use crate::domain::Platform;
use crate::media::cache::MediaCache;
use crate::tasks::Backoff;
use config::MatrixConfig;
use outbound::{ClientSlot, MatrixOutbound};

pub use doctor::doctor;
pub use outbound::txn_id;
pub use spec::SPEC;

pub const MATRIX: Platform = Platform::named("matrix");

pub struct MatrixAdapter {
    config: MatrixConfig,
    client: ClientSlot,
    outbound: Arc<MatrixOutbound>,
}

impl Adapter for MatrixAdapter {
    fn from_config(config: &Config) -> anyhow::Result<Option<MatrixAdapter>> {
        let Some(section) = config.section::<MatrixConfig>("matrix")? else {
            return Ok(None);
        };
        if section.user_id.is_none() {
            return Ok(None);
        }
        section.check().context("matrix adapter")?;
        if section.allow_all_users {
            tracing::warn!("matrix.allow_all_users is on: everyone who can reach the bot can talk to the agent");
        }
        let client: ClientSlot = Arc::new(OnceLock::new());
        Ok(Some(MatrixAdapter {
            config: section,
            outbound: Arc::new(MatrixOutbound::new(client.clone())),
            client,
        }))
    }

    fn platform(&self) -> Platform {
        MATRIX
    }

    fn outbound(&self) -> Arc<dyn Outbound> {
        self.outbound.clone()
    }

    fn pace(&self, _config: &Config) -> Option<crate::delivery::pace::Limits> {
        Some(spec::limits())
    }

    fn spawn(self: Box<Self>, edge: Edge, tracker: &TaskTracker, cancel: CancellationToken) {
        let this = *self;
        tracker.spawn(start(this.config, this.client, edge, cancel));
    }
}

/// Builds the client, logs in (retried with backoff: a homeserver that is down is waited
/// for), then runs the sync loop until `cancel`.
async fn start(config: MatrixConfig, slot: ClientSlot, edge: Edge, cancel: CancellationToken) {
    let dir = session::dir(&edge.config.server.data_dir);
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
    let client = loop {
        let attempt = async {
            let client = session::build(&config, &dir).await?;
            session::log_in(&client, &config, &dir).await?;
            anyhow::Ok(client)
        };
        match attempt.await {
            Ok(client) => break client,
            Err(e) => tracing::error!(error = format!("{e:#}"), "matrix: cannot log in; retrying"),
        }
        if backoff.wait(&cancel).await.is_err() {
            return;
        }
    };
    let me = config.user().to_string();
    tracing::info!(user = %me, device = ?client.device_id(), "matrix adapter starting");
    let _ = slot.set(client.clone());
    let media = &edge.config.media;
    let cache = Arc::new(MediaCache::under(
        &edge.config.server.data_dir,
        media.cache_hours,
    ));
    let receiver = receive::Receiver {
        client: client.clone(),
        me,
        require_mention: config.require_mention,
        free_response_rooms: config
            .free_response_rooms
            .iter()
            .cloned()
            .collect::<HashSet<_>>(),
        encryption: config.encryption,
        cache,
        edge,
    };
    sync::Syncer { client, receiver }.run(cancel).await;
}
