//! One MCP server tool as a Herald [`Tool`]: the spec the model sees (screened, capped), what
//! its annotations mean for approval, and a call that turns the server's answer into the text
//! the model reads plus any images ([`McpResult`], the hand-over for image content parts).
//!
//! A call has the server's `timeout_secs`; each progress notification from the server resets
//! that clock, up to `max_call_secs` in all. A call that times out rings `probe` (the connection
//! task pings the server and starts a new session if that goes unanswered); a call that finds
//! the connection gone says so (`Unavailable`) and rings `broken`.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    ResourceContents, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use tokio::sync::Notify;

use super::client::HeraldClient;
use crate::agent::tools::{Origin, Tool, ToolContext, ToolError, ToolOutput};
use crate::llm::{Blob, ToolSpec};
use crate::screen::{cap_head_tail, screen};

use super::names::tool_name;

/// The longest tool description the model is shown.
pub const MAX_DESCRIPTION: usize = 1_000;
/// The longest result the model is given (head and tail kept; the turn loop's spill previews
/// anything long).
pub const MAX_RESULT: usize = 100_000;

/// What one server's session lends its tools: the peer, the handler (progress tokens) and the
/// bells the connection task listens to.
#[derive(Clone)]
pub struct Session {
    pub peer: Peer<RoleClient>,
    pub client: HeraldClient,
    /// Rung when a call finds the connection gone (over HTTP nothing else may notice).
    pub broken: Arc<Notify>,
    /// Rung when a call timed out: the session may be lost; the connection task checks.
    pub probe: Arc<Notify>,
}

pub struct McpTool {
    pub server: String,
    /// The tool's name on its server.
    pub remote: String,
    pub spec: ToolSpec,
    /// Why a call asks first: `config` (`require_approval`) or `destructive hint`.
    pub asks: Option<&'static str>,
    /// The server marks the tool `readOnlyHint: true`.
    pub read_only: bool,
    pub timeout: Duration,
    /// The cap on a call whose progress keeps extending it.
    pub max_call: Duration,
    pub session: Session,
}

/// A tool result: the text the model reads and the images the server sent (decoded), for a
/// model that takes image parts. Until the request carries parts the text describes each image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpResult {
    pub text: String,
    pub images: Vec<McpImage>,
    /// Embedded binary resources (`resource` content with a `blob`), decoded.
    pub blobs: Vec<McpBlob>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpImage {
    pub mime_type: String,
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpBlob {
    pub uri: String,
    pub mime_type: Option<String>,
    pub data: Vec<u8>,
}

impl McpResult {
    /// The result as a tool output: the text, then the images and blobs as files (labelled
    /// by the tool that made them, blobs by the last segment of their URI).
    pub fn into_output(self, tool: &str) -> ToolOutput {
        let mut files: Vec<Blob> = self
            .images
            .into_iter()
            .map(|i| Blob::new(i.mime_type, i.data, format!("image from {tool}")))
            .collect();
        files.extend(self.blobs.into_iter().map(|b| {
            let name = b.uri.rsplit('/').next().unwrap_or_default().to_string();
            let mime = b
                .mime_type
                .unwrap_or_else(|| "application/octet-stream".into());
            Blob::new(mime, b.data, if name.is_empty() { b.uri } else { name })
        }));
        ToolOutput {
            text: self.text,
            files,
            attach: Vec::new(),
        }
    }
}

/// Why a server's tool asks before each call, if it does: the operator's `require_approval`
/// first; then the tool's own `destructiveHint: true` (not also `readOnlyHint: true`) unless the
/// operator lists it in `allow`.
pub fn asks_because(
    server: &crate::config::McpServer,
    tool: &rmcp::model::Tool,
) -> Option<&'static str> {
    if server.require_approval.covers(&tool.name) {
        return Some("config");
    }
    let a = tool.annotations.as_ref();
    let destructive = a.and_then(|a| a.destructive_hint) == Some(true);
    let read_only = a.and_then(|a| a.read_only_hint) == Some(true);
    if destructive && !read_only && !server.allow.iter().any(|n| n == tool.name.as_ref()) {
        return Some("destructive hint");
    }
    None
}

impl McpTool {
    /// The tool as the model will see it, or why it is withheld (a screening hit in its
    /// description or schema: text from a third party that lands in the prompt).
    pub fn build(
        server: &crate::config::McpServer,
        tool: &rmcp::model::Tool,
        session: Session,
    ) -> Result<McpTool, super::ToolWithheld> {
        let description = tool.description.as_deref().unwrap_or_default();
        let schema = serde_json::Value::Object((*tool.input_schema).clone());
        let schema_text = schema.to_string();
        for text in [description, schema_text.as_str(), tool.name.as_ref()] {
            if let Some(finding) = screen(text) {
                return Err(super::ToolWithheld::Screened(finding.to_string()));
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
        let timeout = Duration::from_secs(server.timeout_secs);
        Ok(McpTool {
            server: server.name.clone(),
            remote: tool.name.to_string(),
            spec: ToolSpec {
                name: tool_name(&server.name, &tool.name),
                description,
                parameters: schema,
            },
            asks: asks_because(server, tool),
            read_only: tool
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
            timeout,
            max_call: Duration::from_secs(server.max_call_secs).max(timeout),
            session,
        })
    }

    /// One call, with its images.
    pub async fn call_full(&self, arguments: &str) -> Result<McpResult, ToolError> {
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
        let mut options =
            PeerRequestOptions::with_timeout(self.timeout).reset_timeout_on_progress();
        options.max_total_timeout = Some(self.max_call);
        let sent = self
            .session
            .peer
            .send_cancellable_request(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                options,
            )
            .await;
        let handle = match sent {
            Ok(h) => h,
            Err(e) => return Err(self.failed(e)),
        };
        let token = handle.progress_token.clone();
        let calls = self.session.client.calls.clone();
        calls
            .lock()
            .expect("progress map")
            .insert(token.clone(), self.spec.name.clone());
        // A time-out inside await_response sends the server `notifications/cancelled`.
        let result = handle.await_response().await;
        calls.lock().expect("progress map").remove(&token);
        match result {
            Ok(ServerResult::CallToolResult(r)) => answer(r),
            Ok(_) => Err(ToolError::Failed(
                "the server's answer was not a tool result".into(),
            )),
            Err(e) => Err(self.failed(e)),
        }
    }

    fn failed(&self, e: ServiceError) -> ToolError {
        let e = service_error(&self.server, e, self.timeout);
        match e {
            ToolError::Unavailable(_) => self.session.broken.notify_one(),
            ToolError::TimedOut(_) => self.session.probe.notify_one(),
            _ => {}
        }
        e
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
        self.asks.is_some()
    }

    fn approval_reason(&self) -> Option<String> {
        self.asks.map(str::to_string)
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    async fn call(&self, _ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        self.call_full(arguments).await.map(|r| r.text)
    }

    async fn call_output(
        &self,
        _ctx: &ToolContext,
        arguments: &str,
    ) -> Result<ToolOutput, ToolError> {
        let r = self.call_full(arguments).await?;
        Ok(r.into_output(&self.spec.name))
    }
}

fn service_error(server: &str, e: ServiceError, base: Duration) -> ToolError {
    match e {
        ServiceError::McpError(data) => ToolError::Failed(super::connect::short(&data.message)),
        ServiceError::Timeout { timeout } => ToolError::TimedOut(timeout.max(base)),
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => ToolError::Unavailable(
            format!("the connection to the MCP server {server:?} closed"),
        ),
        ServiceError::Cancelled { .. } => ToolError::Unavailable(format!(
            "the connection to the MCP server {server:?} was reset"
        )),
        other => ToolError::Failed(super::connect::short(&other.to_string())),
    }
}

/// The text the model reads (text parts joined, other parts described, capped) and the images
/// decoded (named by the turn, not here); an `isError` result is a failure with the same text.
pub fn answer(r: CallToolResult) -> Result<McpResult, ToolError> {
    let mut parts = Vec::with_capacity(r.content.len());
    let mut images = Vec::new();
    let mut blobs = Vec::new();
    for block in &r.content {
        parts.push(match block {
            ContentBlock::Text(t) => t.text.clone(),
            // A decoded image travels as a file: the turn names it in a line of its own.
            ContentBlock::Image(i) => {
                match base64::engine::general_purpose::STANDARD.decode(i.data.trim()) {
                    Ok(data) => {
                        images.push(McpImage {
                            mime_type: i.mime_type.clone(),
                            data,
                        });
                        continue;
                    }
                    Err(_) => format!(
                        "[image: {}, {} bytes, not valid base64]",
                        i.mime_type,
                        b64_len(&i.data)
                    ),
                }
            }
            ContentBlock::Audio(a) => {
                format!("[audio: {}, {} bytes]", a.mime_type, b64_len(&a.data))
            }
            ContentBlock::Resource(e) => {
                if let ResourceContents::BlobResourceContents {
                    uri,
                    blob,
                    mime_type,
                    ..
                } = &e.resource
                {
                    if let Ok(data) = base64::engine::general_purpose::STANDARD.decode(blob.trim())
                    {
                        blobs.push(McpBlob {
                            uri: uri.clone(),
                            mime_type: mime_type.clone(),
                            data,
                        });
                    }
                }
                resource_text(&e.resource)
            }
            ContentBlock::ResourceLink(l) => format!(
                "[resource link: {}{}; read it with the read_resource tool of this server]",
                l.uri,
                l.mime_type
                    .as_deref()
                    .map(|m| format!(", {m}"))
                    .unwrap_or_default()
            ),
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
    Ok(McpResult {
        text,
        images,
        blobs,
    })
}

/// An embedded or read resource as text: its text, or a description of its bytes.
pub fn resource_text(r: &ResourceContents) -> String {
    match r {
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
    }
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
