//! `attach_file`: the model adds a file to this turn's reply, named by the short id a tool
//! result gave it (or a person's file's hash).
//!
//! It may name only a file the caller's lane holds in its current session — a tool row's or
//! a person's attachment in the transcript, or a file a tool produced earlier in this turn.
//! A hash from anywhere else (another lane's, even when known exactly) answers like a file
//! that does not exist, and so does one of a session of another agent (the current session is
//! the turn's agent's; the check is kept so a session id can never cross agents). The tool changes nothing: a retried turn runs it again.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::agent::turn_files::{file_sha, short_id, SHORT_ID};
use crate::domain::{Attachment, MediaSource};
use crate::llm::ToolSpec;
use crate::store::Store;

pub struct AttachFile {
    pub store: Arc<dyn Store>,
}

#[derive(Deserialize)]
struct Args {
    file: String,
}

#[async_trait]
impl Tool for AttachFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "attach_file".into(),
            description: "Send a file with your reply: pass the id a tool result gave it \
                (`[file <id>: …]`). One file per call; call again for more."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "file": {"type": "string", "description": "the file's id"}
                },
                "required": ["file"]
            }),
        }
    }

    fn repeat_on_retry(&self) -> bool {
        true
    }

    async fn call(&self, ctx: &ToolContext, arguments: &str) -> Result<String, ToolError> {
        self.call_output(ctx, arguments).await.map(|o| o.text)
    }

    async fn call_output(
        &self,
        ctx: &ToolContext,
        arguments: &str,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = serde_json::from_str(arguments).map_err(|e| {
            ToolError::BadArguments(format!("arguments are not valid JSON for attach_file: {e}"))
        })?;
        let id = args.file.trim().to_ascii_lowercase();
        let id = id.strip_prefix("file ").unwrap_or(&id).trim();
        if id.len() < SHORT_ID || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ToolError::BadArguments(format!(
                "`file` must be the {SHORT_ID}-digit id a tool result gave the file"
            )));
        }
        let found = match find(ctx, id) {
            Some(a) => Some(a),
            None => self.in_session(ctx, id).await?,
        };
        let Some(file) = found else {
            return Err(ToolError::Failed(format!(
                "there is no file {id} in this conversation"
            )));
        };
        let sha = file_sha(&file).unwrap_or_default().to_string();
        let text = format!(
            "{} ({}) will be sent with your reply",
            file.name.as_deref().unwrap_or("the file"),
            short_id(&sha)
        );
        Ok(ToolOutput {
            text,
            files: Vec::new(),
            attach: vec![file],
        })
    }
}

impl AttachFile {
    /// The file in the caller's current session, if its transcript holds it. The session must
    /// be the caller lane's and agent's: a session id from elsewhere finds nothing.
    async fn in_session(
        &self,
        ctx: &ToolContext,
        id: &str,
    ) -> Result<Option<Attachment>, ToolError> {
        let unavailable = |e: crate::store::StoreError| ToolError::Unavailable(e.to_string());
        let session = self
            .store
            .session_get(&ctx.session_id)
            .await
            .map_err(unavailable)?;
        if session.is_none_or(|s| s.lane != ctx.lane.as_str() || s.agent != ctx.agent) {
            return Ok(None);
        }
        let rows = self
            .store
            .messages(&ctx.session_id, false)
            .await
            .map_err(unavailable)?;
        let media: Vec<Attachment> = rows.into_iter().flat_map(|m| m.media).collect();
        Ok(find_in(&media, id))
    }
}

/// A file this turn produced.
fn find(ctx: &ToolContext, id: &str) -> Option<Attachment> {
    find_in(&ctx.turn_files, id)
}

/// The file among `media` whose hash starts with `id`, as the reply will reference it (by
/// its cached bytes).
fn find_in(media: &[Attachment], id: &str) -> Option<Attachment> {
    media.iter().find_map(|a| {
        let sha = file_sha(a)?;
        if !sha.starts_with(id) {
            return None;
        }
        let mut a = a.clone();
        a.source = MediaSource::Cached(sha.to_string());
        Some(a)
    })
}
