//! Signal adapter: signal-cli's HTTP daemon (`signal-cli -a ACCOUNT daemon --http`) in and out,
//! the tool self-hosted Signal bots run, since Signal offers no bot API.
//!
//! `app` sees it as an [`Adapter`]: `from_config` (the JSON-RPC client, no network; `None`
//! without `signal.url` and `signal.account`), `outbound` (`send`, `sendTyping`, edits by
//! `editTimestamp`, `remoteDelete`), no routes (Herald is the daemon's client; nothing listens
//! for Signal), and `spawn` (the event stream, reopened with backoff, tracked and cancellable).
//!
//! signal-cli's JSON stays in `inbound.rs` (envelopes) and `rpc.rs` (calls and errors); the
//! core sees `MessageEvent`s and `SendError`s.
//!
//! Must not: log a message's text or a file; answer someone off the allowlist.

pub mod config;
mod doctor;
mod events;
mod files_out;
pub mod ids;
pub mod inbound;
mod outbound;
mod receive;
pub mod rpc;
pub mod spec;

mod journal;

#[cfg(test)]
mod inbound_tests;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Adapter, Edge};
use crate::config::Config;
use crate::delivery::Outbound;
use crate::domain::Platform;
use crate::media::MediaCache;
use config::SignalConfig;
use outbound::SignalOutbound;
use receive::Receiver;
use rpc::SignalRpc;

pub use doctor::doctor;
pub use receive::CANNOT_READ;
pub use spec::SPEC;

pub const SIGNAL: Platform = Platform::named("signal");

pub struct SignalAdapter {
    config: SignalConfig,
    rpc: SignalRpc,
    outbound: Arc<SignalOutbound>,
}

impl SignalAdapter {
    /// Builds the client from the section (no network yet); files go under `files_dir`, else
    /// `<data_dir>/signal-files`.
    pub fn new(config: SignalConfig, data_dir: &std::path::Path) -> anyhow::Result<SignalAdapter> {
        config.check()?;
        let url = config.url.as_ref().map(|u| u.as_str()).unwrap_or_default();
        let rpc = SignalRpc::new(url)?;
        if config.allow_all_users {
            tracing::warn!("signal.allow_all_users is on: everyone who writes to the number can talk to the agent");
        }
        let files_dir: PathBuf = config
            .files_dir
            .clone()
            .unwrap_or_else(|| data_dir.join("signal-files"));
        let journal = journal::Journal::open(&data_dir.join("signal-sent.journal"));
        let outbound = SignalOutbound::new(rpc.clone(), files_dir, config.edits, journal);
        Ok(SignalAdapter {
            config,
            rpc,
            outbound: Arc::new(outbound),
        })
    }
}

impl Adapter for SignalAdapter {
    fn from_config(config: &Config) -> anyhow::Result<Option<SignalAdapter>> {
        let Some(section) = config.section::<SignalConfig>("signal")? else {
            return Ok(None);
        };
        if !section.wanted() {
            return Ok(None);
        }
        SignalAdapter::new(section, &config.server.data_dir)
            .context("signal adapter")
            .map(Some)
    }

    fn platform(&self) -> Platform {
        SIGNAL
    }

    fn outbound(&self) -> Arc<dyn Outbound> {
        self.outbound.clone()
    }

    fn spawn(self: Box<Self>, edge: Edge, tracker: &TaskTracker, cancel: CancellationToken) {
        let this = *self;
        let http = match this.rpc.stream_client() {
            Ok(h) => h,
            Err(e) => {
                tracing::error!(error = %e, "signal adapter cannot build its HTTP client; not receiving");
                return;
            }
        };
        let c = &edge.config;
        let receiver = Receiver {
            ingest: edge.ingest.clone(),
            approvals: edge.approvals.clone(),
            rpc: this.rpc.clone(),
            account: this.config.account().to_string(),
            free_response_groups: this
                .config
                .free_response_groups
                .iter()
                .cloned()
                .collect::<HashSet<_>>(),
            allowed: this.config.allowed_users.iter().cloned().collect(),
            allow_all: this.config.allow_all_users,
            cache: MediaCache::under(&c.server.data_dir, c.media.cache_hours),
            max_bytes: c.media.max_bytes,
        };
        let stream = events::Stream {
            receiver: Arc::new(receiver),
            url: this.rpc.events_url(),
            http,
        };
        tracing::info!("signal adapter starting");
        tracker.spawn(stream.run(cancel));
    }
}
