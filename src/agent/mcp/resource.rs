//! `<server>__read_resource`: reads a resource (a link a tool result named, or any URI the
//! server lists) from that one server, offered only while it declares the resources
//! capability. The URI goes to the server that offered the tool and nowhere else: a link in
//! one server's result cannot make Herald fetch from another server or from the network.

use async_trait::async_trait;
use rmcp::model::ReadResourceRequestParams;

use super::connect::short;
use super::tool::{resource_text, Session, MAX_RESULT};
use crate::agent::tools::{Origin, Tool, ToolContext, ToolError};
use crate::llm::ToolSpec;
use crate::screen::cap_head_tail;

/// The tool's name on the server side of the `<server>__` prefix.
pub const NAME: &str = "read_resource";

pub struct ReadResource {
    pub server: String,
    pub name: String,
    pub timeout: std::time::Duration,
    pub session: Session,
}

#[async_trait]
impl Tool for ReadResource {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: format!(
                "Read a resource of the MCP server {:?} by its URI (a resource link in one of its \
                 tool results): its text, or a description of binary content.",
                self.server
            ),
            parameters: serde_json::json!({
                "type": "object",
                "properties": {"uri": {"type": "string", "description": "The resource URI."}},
                "required": ["uri"]
            }),
        }
    }

    fn origin(&self) -> Origin {
        Origin::Mcp(self.server.clone())
    }

    fn read_only(&self) -> bool {
        true
    }

    async fn call(&self, _ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        let uri = serde_json::from_str::<serde_json::Value>(arguments)
            .ok()
            .and_then(|v| v["uri"].as_str().map(str::to_string))
            .ok_or_else(|| ToolError::BadArguments("give the resource's uri".into()))?;
        let read = self
            .session
            .peer
            .read_resource(ReadResourceRequestParams::new(uri));
        let result = match tokio::time::timeout(self.timeout, read).await {
            Err(_) => {
                self.session.probe.notify_one();
                return Err(ToolError::TimedOut(self.timeout));
            }
            Ok(Err(rmcp::service::ServiceError::McpError(e))) => {
                return Err(ToolError::Failed(short(&e.message)))
            }
            Ok(Err(e)) => {
                self.session.broken.notify_one();
                return Err(ToolError::Unavailable(short(&e.to_string())));
            }
            Ok(Ok(r)) => r,
        };
        let text: Vec<String> = result.contents.iter().map(resource_text).collect();
        Ok(cap_head_tail(&text.join("\n"), MAX_RESULT, "the resource"))
    }
}
