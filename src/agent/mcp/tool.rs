//! One MCP server tool as a Herald [`Tool`]: the spec the model sees (screened, capped), and a
//! call that turns the server's answer into the text the model reads.
//!
//! The call holds the session's peer handle; if the server went away the call says so
//! (`Unavailable`) and the connection task, which saw the same close, reconnects.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, ResourceContents};
use rmcp::service::{Peer, RoleClient, ServiceError};
use tokio::sync::Notify;

use crate::agent::screen::{cap_head_tail, screen};
use crate::agent::tools::{Origin, Tool, ToolContext, ToolError};
use crate::llm::ToolSpec;

use super::names::tool_name;

/// The longest tool description the model is shown.
pub const MAX_DESCRIPTION: usize = 1_000;
/// The longest result the model is given (head and tail kept; the turn loop's spill previews
/// anything long).
pub const MAX_RESULT: usize = 100_000;

pub struct McpTool {
    pub server: String,
    /// The tool's name on its server.
    pub remote: String,
    pub spec: ToolSpec,
    pub asks: bool,
    pub timeout: Duration,
    pub peer: Peer<RoleClient>,
    /// Told when a call finds the connection gone (over HTTP nothing else may notice).
    pub broken: Arc<Notify>,
}

impl McpTool {
    /// The tool as the model will see it, or why it is withheld (a screening hit in its
    /// description or schema: text from a third party that lands in the prompt).
    pub fn build(
        server: &crate::config::McpServer,
        tool: &rmcp::model::Tool,
        peer: Peer<RoleClient>,
        broken: Arc<Notify>,
    ) -> Result<McpTool, String> {
        let description = tool.description.as_deref().unwrap_or_default();
        let schema = serde_json::Value::Object((*tool.input_schema).clone());
        let schema_text = schema.to_string();
        for text in [description, schema_text.as_str(), tool.name.as_ref()] {
            if let Some(finding) = screen(text) {
                return Err(format!("its description or schema carries {finding}"));
            }
        }
        let mut description: String = description.chars().take(MAX_DESCRIPTION).collect();
        if tool
            .description
            .as_ref()
            .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION)
        {
            description.push('…');
        }
        Ok(McpTool {
            server: server.name.clone(),
            remote: tool.name.to_string(),
            spec: ToolSpec {
                name: tool_name(&server.name, &tool.name),
                description,
                parameters: schema,
            },
            asks: server.require_approval.covers(&tool.name),
            timeout: Duration::from_secs(server.timeout_secs),
            peer,
            broken,
        })
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn origin(&self) -> Origin {
        Origin::Mcp(self.server.clone())
    }

    fn requires_approval(&self) -> bool {
        self.asks
    }

    async fn call(&self, _ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        let mut params = CallToolRequestParams::new(self.remote.clone());
        if !arguments.trim().is_empty() {
            match serde_json::from_str::<serde_json::Value>(arguments) {
                Ok(serde_json::Value::Object(map)) => params = params.with_arguments(map),
                Ok(_) => {
                    return Err(ToolError::BadArguments(
                        "the arguments must be a JSON object".into(),
                    ))
                }
                Err(e) => {
                    return Err(ToolError::BadArguments(format!(
                        "the arguments are not JSON: {e}"
                    )))
                }
            }
        }
        // Dropping the call on a time-out sends the server `notifications/cancelled`.
        let result = tokio::time::timeout(self.timeout, self.peer.call_tool(params)).await;
        match result {
            Err(_) => Err(ToolError::TimedOut(self.timeout)),
            Ok(Err(e)) => {
                let e = service_error(&self.server, e);
                if matches!(e, ToolError::Unavailable(_)) {
                    self.broken.notify_one();
                }
                Err(e)
            }
            Ok(Ok(r)) => answer(r),
        }
    }
}

fn service_error(server: &str, e: ServiceError) -> ToolError {
    match e {
        ServiceError::McpError(data) => ToolError::Failed(super::connect::short(&data.message)),
        ServiceError::Timeout { timeout } => ToolError::TimedOut(timeout),
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => ToolError::Unavailable(
            format!("the connection to the MCP server {server:?} closed"),
        ),
        other => ToolError::Failed(super::connect::short(&other.to_string())),
    }
}

/// The text the model reads: text parts joined, other parts described, capped; an `isError`
/// result is a failure with the same text.
pub fn answer(r: CallToolResult) -> Result<String, ToolError> {
    let mut parts = Vec::with_capacity(r.content.len());
    for block in &r.content {
        parts.push(match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => {
                format!("[image: {}, {} bytes]", i.mime_type, b64_len(&i.data))
            }
            ContentBlock::Audio(a) => {
                format!("[audio: {}, {} bytes]", a.mime_type, b64_len(&a.data))
            }
            ContentBlock::Resource(e) => match &e.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("[resource {uri}]\n{text}")
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    blob,
                    mime_type,
                    ..
                } => format!(
                    "[resource {uri}: {}, {} bytes]",
                    mime_type.as_deref().unwrap_or("binary"),
                    b64_len(blob)
                ),
                _ => "[resource of an unknown kind]".to_string(),
            },
            ContentBlock::ResourceLink(l) => format!("[resource link: {}]", l.uri),
            _ => "[content of an unknown kind]".to_string(),
        });
    }
    if parts.is_empty() {
        if let Some(s) = &r.structured_content {
            parts.push(s.to_string());
        }
    }
    let text = cap_head_tail(&parts.join("\n"), MAX_RESULT, "the tool result");
    if r.is_error == Some(true) {
        return Err(ToolError::Failed(text));
    }
    Ok(text)
}

/// Decoded size of base64 data, without decoding it.
fn b64_len(data: &str) -> usize {
    let pad = data.bytes().rev().take_while(|b| *b == b'=').count();
    (data.len() / 4 * 3).saturating_sub(pad)
}

/// Keeps `Arc<dyn Tool>` construction in one place.
pub fn into_dyn(t: McpTool) -> Arc<dyn Tool> {
    Arc::new(t)
}
