//! The web chat's outbound side. Web replies are read by the waiting HTTP request (or the
//! page's transcript view), so "sending" records delivery and keeps the whole text in one
//! chunk.

use async_trait::async_trait;

use crate::delivery::{Outbound, SendError};
use crate::domain::Platform;
use crate::store::OutboxRow;

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
}
