//! Files out: Slack's external upload in three calls — `files.getUploadURLExternal` (name and
//! length) gives an upload URL and a file id, the bytes go to that URL, and
//! `files.completeUploadExternal` shares the file into the channel (and thread).
//!
//! Must not: log the upload URL (it carries a one-time ticket).

use serde_json::{json, Value};

use super::outbound::{classify, SlackOutbound};
use crate::delivery::{OutFile, SendError};
use crate::store::OutboxRow;

impl SlackOutbound {
    /// Uploads one file row; returns the file id.
    pub(super) async fn upload(
        &self,
        row: &OutboxRow,
        file: &OutFile,
    ) -> Result<String, SendError> {
        let name = if file.name.trim().is_empty() {
            "file".to_string()
        } else {
            file.name.clone()
        };
        let ticket: Value = self
            .api
            .form(
                "files.getUploadURLExternal",
                &self.token,
                &[
                    ("filename", name.clone()),
                    ("length", file.data.len().to_string()),
                ],
            )
            .await
            .map_err(|e| classify(&e))?;
        let (Some(url), Some(id)) = (
            ticket.get("upload_url").and_then(Value::as_str),
            ticket.get("file_id").and_then(Value::as_str),
        ) else {
            return Err(SendError::Transient(
                "slack files.getUploadURLExternal: no upload_url or file_id".into(),
            ));
        };
        self.api
            .upload(url, &self.token, file.data.clone())
            .await
            .map_err(|e| classify(&e))?;
        let mut params = vec![
            ("files", json!([{ "id": id, "title": name }]).to_string()),
            ("channel_id", row.chat_id.clone()),
        ];
        if let Some(t) = &row.thread_id {
            params.push(("thread_ts", t.clone()));
        }
        let _: Value = self
            .api
            .form("files.completeUploadExternal", &self.token, &params)
            .await
            .map_err(|e| classify(&e))?;
        Ok(id.to_string())
    }
}
