//! Herald's side of an MCP session: who it says it is, what it declares, and what it does with
//! what a server sends unasked (list changes, progress, log messages, elicitation, sampling).
//!
//! Nothing here changes a running turn: a list change only wakes the connection task, which
//! re-lists and swaps the server's tools for the *next* snapshot. Everything a server writes is
//! third-party text: it is logged escaped and capped ([`super::connect::short`]), never raw.
//!
//! rmcp marks roots, sampling and logging deprecated (SEP-2577, a later protocol version);
//! the servers in use today speak the versions that have them, so they are handled here.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientInfo, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData, Implementation,
    ListRootsResult, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
    ProgressToken, RootsCapabilities,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient};
use rmcp::ClientHandler;
use tokio::sync::Notify;

use super::connect::short;

/// The client handler of one server's session.
#[derive(Clone)]
pub struct HeraldClient {
    pub server: String,
    /// Woken by `notifications/tools/list_changed` (and resources): re-list before next turn.
    pub lists_changed: Arc<Notify>,
    /// Which call a progress token belongs to (`tool name`), for the log line.
    pub calls: Arc<Mutex<HashMap<ProgressToken, String>>>,
}

impl HeraldClient {
    pub fn new(server: &str) -> HeraldClient {
        HeraldClient {
            server: server.to_string(),
            lists_changed: Arc::new(Notify::new()),
            calls: Arc::new(Mutex::new(HashMap::new())),
        }
    }
}

/// `herald` and its version, with roots declared (an empty list: Herald exposes no files)
/// and neither sampling nor elicitation declared (both are declined if a server asks anyway).
pub fn client_info() -> ClientInfo {
    let mut capabilities = ClientCapabilities::default();
    capabilities.roots = Some(RootsCapabilities::default());
    ClientInfo::new(
        capabilities,
        Implementation::new("herald", env!("CARGO_PKG_VERSION")),
    )
}

impl ClientHandler for HeraldClient {
    fn get_info(&self) -> ClientInfo {
        client_info()
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::default())
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        tracing::info!(server = %self.server, "mcp server asked for sampling; declined (Herald does not lend its model to servers)");
        Err(ErrorData::invalid_request(
            "sampling is not supported by this client",
            None,
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } => short(message),
            _ => "(not a form)".to_string(),
        };
        tracing::info!(server = %self.server, %message, "mcp server asked the person a question (elicitation); declined");
        Ok(ElicitResult::new(ElicitationAction::Decline))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "mcp server changed its tool list; re-listing before the next turn");
        self.lists_changed.notify_one();
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // Resources are read by URI on demand (`<server>__read_resource`); nothing is cached.
        tracing::debug!(server = %self.server, "mcp server changed its resource list");
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let tool = self
            .calls
            .lock()
            .expect("progress map")
            .get(&params.progress_token)
            .cloned()
            .unwrap_or_default();
        let total = params.total.map(|t| format!("/{t}")).unwrap_or_default();
        tracing::debug!(
            server = %self.server,
            %tool,
            "mcp call progress {}{total} {}",
            params.progress,
            params.message.as_deref().map(short).unwrap_or_default()
        );
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let text = match &params.data {
            serde_json::Value::String(s) => short(s),
            other => short(&other.to_string()),
        };
        let logger = params.logger.as_deref().map(short).unwrap_or_default();
        let server = &self.server;
        match params.level {
            LoggingLevel::Debug => tracing::debug!(%server, %logger, "mcp server log: {text}"),
            LoggingLevel::Info | LoggingLevel::Notice => {
                tracing::info!(%server, %logger, "mcp server log: {text}")
            }
            LoggingLevel::Warning => tracing::warn!(%server, %logger, "mcp server log: {text}"),
            _ => tracing::error!(%server, %logger, "mcp server log: {text}"),
        }
    }
}
