//! The web chat's outbound side. Web replies are read by the waiting HTTP request (or the
//! page's transcript view), so "sending" records delivery and keeps the whole text in one
//! chunk; approval questions are read by the page from the pending requests.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Adapter, Edge};
use crate::config::{Access, Admit, Capabilities, Config, PlatformSpec};
use crate::delivery::{Ask, OutFile, Outbound, SendError};
use crate::domain::Platform;
use crate::store::OutboxRow;

/// The web chat as an adapter: only its sending side. Its messages arrive through the HTTP
/// server's own routes (`http/`), so there is nothing to start.
/// The web chat, for the core: trusted by its listener (loopback or the bearer token), lanes
/// named by the page, answers shown whole or streamed over the page's own channel.
pub static SPEC: PlatformSpec = PlatformSpec {
    name: Platform::WEB,
    caps: Capabilities {
        max_text: usize::MAX,
        markup: "markdown",
        edits: false,
        buttons: true,
        threads: false,
        // `POST /api/v1/chat` and the page take text only.
        files_in: false,
        files_out: true,
        typing: false,
    },
    prompt_hint:
        "You are talking through the local web chat; plain text and simple Markdown both read well.",
    admit: Admit::Local,
    access: |_| Access::default(),
    configured: |c| c.web.enabled,
    how_to_enable: "set web.enabled = true",
    person_id: |id| !id.is_empty(),
    target: Some(target),
    edit_interval: |_| None,
    dm_by_person_id: true,
    thread_is_chat: false,
    files: None,
    section: None,
};

/// Longest web lane name accepted; web lanes are named by the web chat, never by a person.
const MAX_WEB_LANE_LEN: usize = 100;

/// `web:<lane>`: no thread; the lane 1-100 characters from `A-Z a-z 0-9 . _ -`.
fn target(rest: &str) -> Result<(String, Option<String>), String> {
    if rest.contains(':') {
        return Err("web targets take no thread: use web:<lane>".into());
    }
    let valid = !rest.is_empty()
        && rest.len() <= MAX_WEB_LANE_LEN
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !valid {
        return Err("web lane must be 1-100 characters from A-Z a-z 0-9 . _ -".into());
    }
    Ok((rest.to_string(), None))
}

pub struct WebAdapter;

impl Adapter for WebAdapter {
    fn from_config(config: &Config) -> anyhow::Result<Option<WebAdapter>> {
        Ok(config.web.enabled.then_some(WebAdapter))
    }

    fn platform(&self) -> Platform {
        Platform::WEB
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
        Platform::WEB
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
