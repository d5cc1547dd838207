//! The web chat's outbound side. Web replies are read by the waiting HTTP request (or the
//! page's transcript view), so "sending" records delivery and keeps the whole text in one
//! chunk; approval questions are read by the page from the pending requests.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Adapter, Edge};
use crate::config::Config;
use crate::delivery::{Ask, OutFile, Outbound, SendError};
use crate::domain::Platform;
use crate::store::OutboxRow;

/// The web chat as an adapter: only its sending side. Its messages arrive through the HTTP
/// server's own routes (`http/`), so there is nothing to start.
pub struct WebAdapter;

impl Adapter for WebAdapter {
    fn from_config(config: &Config) -> anyhow::Result<Option<WebAdapter>> {
        Ok(config.web.enabled.then_some(WebAdapter))
    }

    fn platform(&self) -> Platform {
        Platform::Web
    }

    fn outbound(&self) -> Arc<dyn Outbound> {
        Arc::new(WebOutbound)
    }

    fn spawn(self: Box<Self>, _edge: Edge, _tracker: &TaskTracker, _cancel: CancellationToken) {}
}

pub struct WebOutbound;

#[async_trait]
impl Outbound for WebOutbound {
    fn platform(&self) -> Platform {
        Platform::Web
    }

    fn split(&self, text: &str) -> Vec<String> {
        vec![text.to_string()]
    }

    async fn send(&self, row: &OutboxRow) -> Result<String, SendError> {
        Ok(format!("web-{}", row.id))
    }

    /// The page shows the file from the answer's row and fetches it from
    /// `GET /api/v1/lanes/{lane}/media/{sha}`, which serves it because this row holds it.
    async fn send_file(&self, row: &OutboxRow, _file: &OutFile) -> Result<String, SendError> {
        Ok(format!("web-{}", row.id))
    }

    /// The page lists its conversation's pending requests and shows their buttons; the
    /// question is the stored request itself.
    async fn ask(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        Ok(format!("web-ask-{}", ask.approval_id))
    }
}
