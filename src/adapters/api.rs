//! The OpenAI-compatible API's outbound side. Its answers are read by the waiting HTTP
//! request (`http/openai/`), so "sending" records delivery and keeps the whole text in one
//! chunk, like the web chat. An API client has no buttons: an approval question goes to the
//! person's linked chat (`lanes/approvals/linked.rs`), never here.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Adapter, Edge};
use crate::config::{Access, Admit, Capabilities, Config, PlatformSpec};
use crate::delivery::{Ask, OutFile, Outbound, SendError};
use crate::domain::Platform;
use crate::store::OutboxRow;

/// The API as an adapter: only its sending side; requests arrive through the HTTP routes.
/// The OpenAI-compatible API, for the core: written only by routes that checked a key, never
/// a delivery target, no buttons (a call's question goes to the person's linked chat).
pub static SPEC: PlatformSpec = PlatformSpec {
    name: Platform::API,
    caps: Capabilities {
        max_text: usize::MAX,
        markup: "markdown",
        edits: false,
        buttons: false,
        threads: false,
        files_in: true,
        files_out: false,
        typing: false,
    },
    prompt_hint: "You are answering through an API client (a chat app or a script); plain text and simple Markdown both read well.",
    admit: Admit::Keyed,
    access: |_| Access::default(),
    configured: |c| c.api.enabled,
    how_to_enable: "set api.enabled = true",
    person_id: |id| !id.is_empty(),
    target: None,
    edit_interval: |_| None,
    dm_by_person_id: false,
    thread_is_chat: false,
    files: None,
    section: None,
};

pub struct ApiAdapter;

impl Adapter for ApiAdapter {
    fn from_config(config: &Config) -> anyhow::Result<Option<ApiAdapter>> {
        Ok(config.api.enabled.then_some(ApiAdapter))
    }

    fn platform(&self) -> Platform {
        Platform::API
    }

    fn outbound(&self) -> Arc<dyn Outbound> {
        Arc::new(ApiOutbound)
    }

    fn spawn(self: Box<Self>, _edge: Edge, _tracker: &TaskTracker, _cancel: CancellationToken) {}
}

pub struct ApiOutbound;

/// Why a question cannot be shown here (the approval desk asks in a linked chat instead).
const NO_BUTTONS: &str = "an API conversation cannot show approval buttons";

#[async_trait]
impl Outbound for ApiOutbound {
    fn platform(&self) -> Platform {
        Platform::API
    }

    fn split(&self, text: &str) -> Vec<String> {
        vec![text.to_string()]
    }

    async fn send(&self, row: &OutboxRow) -> Result<String, SendError> {
        Ok(format!("api-{}", row.id))
    }

    /// A file of an answer is recorded with it; the API answers with the text alone.
    async fn send_file(&self, row: &OutboxRow, _file: &OutFile) -> Result<String, SendError> {
        Ok(format!("api-{}", row.id))
    }

    async fn ask(&self, _ask: &Ask<'_>) -> Result<String, SendError> {
        Err(SendError::Permanent(NO_BUTTONS.into()))
    }
}
