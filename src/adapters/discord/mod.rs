//! Discord adapter (serenity): gateway in, channel messages out.
//!
//! Placeholder interface; the adapter itself is built by the Discord issue. `app` calls
//! exactly these four functions, so the wiring does not change when the body does.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::DiscordConfig;
use crate::delivery::Outbound;
use crate::lanes::LaneRouter;

pub struct DiscordAdapter {
    _config: DiscordConfig,
}

impl DiscordAdapter {
    /// Builds the client from config (no network yet).
    pub fn new(config: &DiscordConfig) -> anyhow::Result<DiscordAdapter> {
        Ok(DiscordAdapter {
            _config: config.clone(),
        })
    }

    /// The outbound side, registered before the lane router is built.
    pub fn outbound(&self) -> Option<Arc<dyn Outbound>> {
        None
    }

    /// Extra HTTP routes (none yet), merged into the daemon's server.
    pub fn routes(&self, _router: Arc<LaneRouter>) -> Option<axum::Router> {
        None
    }

    /// Starts receiving (gateway shards) as tracked, cancellable tasks.
    pub fn spawn(
        self,
        _router: Arc<LaneRouter>,
        _tracker: &TaskTracker,
        _cancel: CancellationToken,
    ) {
    }
}
