//! File rows of the outbox: a reply's files go out after its text, one row each, read from the
//! media cache at send time and handed to the platform's [`Outbound::send_file`].
//!
//! A file the cache no longer holds (swept, or this replica's disk never had it) is not
//! retried: the row is delivered as a short text saying so, with one log line, and counts as
//! sent. The duplicate window is the text one's: a crash between the platform taking the
//! upload and `mark_sent` uploads the file again after the claim expires.

use super::sender::Sender;
use super::{OutFile, Outbound, SendError};
use crate::domain::short_id;
use crate::store::OutboxRow;

impl Sender {
    /// Sends a file row, or the text that stands in for a file that is gone.
    pub(super) async fn send_file_row(
        &self,
        outbound: &dyn Outbound,
        row: &OutboxRow,
    ) -> Result<String, SendError> {
        let file = match row.file() {
            Ok(Some(f)) => f,
            Ok(None) => return outbound.send(row).await,
            Err(why) => {
                tracing::warn!(lane = %row.lane, outbox_id = row.id, error = %why, "a file row's reference does not read; telling the chat");
                return outbound.send(&gone(row, "the file")).await;
            }
        };
        let sha = file.file_sha().unwrap_or_default();
        let name = file
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| format!("{}.bin", short_id(sha)));
        let Some(data) = self.media.get(sha).await else {
            metrics::counter!("herald_outbox_files_missing_total", "platform" => row.platform.to_string()).increment(1);
            tracing::warn!(lane = %row.lane, outbox_id = row.id, file = short_id(sha),
                "a reply's file is no longer in the media cache; the chat is told instead");
            return outbound.send(&gone(row, &format!("the file {name}"))).await;
        };
        let out = OutFile {
            name,
            mime: file
                .mime
                .clone()
                .unwrap_or_else(|| "application/octet-stream".into()),
            data,
        };
        outbound.send_file(row, &out).await
    }
}

/// The row as a text row saying its file is gone.
fn gone(row: &OutboxRow, what: &str) -> OutboxRow {
    OutboxRow {
        text: format!("({what} is no longer available, so it could not be sent.)"),
        media: None,
        ..row.clone()
    }
}
