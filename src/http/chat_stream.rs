//! `POST /api/v1/chat` as server-sent events, for a request with `"stream": true` or
//! `Accept: text/event-stream`: `delta` events with the answer's text as the model writes it
//! (`reset` when a retry or a tool call starts the text over; `reasoning` when the operator
//! shows it), then one `done` event whose data is exactly the JSON the plain request answers.
//!
//! The deltas come from the lanes' in-process hub (display state, this replica only); `done`
//! is read from the store like the plain answer, so the text a client ends with is the
//! committed reply, whatever the deltas showed.

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde_json::json;
use tokio::sync::broadcast;

use super::turn_watch::TurnWatch;
use super::HttpState;
use crate::lanes::{StreamEvent, StreamKind};
use crate::store::InboxStatus;

/// Whether the client asked for events rather than one JSON answer.
pub(super) fn wanted(flag: bool, headers: &HeaderMap) -> bool {
    flag || headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

struct Run {
    state: HttpState,
    inbox_id: i64,
    watch: TurnWatch,
    deadline: tokio::time::Instant,
    /// The row is known to be pending (inserted just now): skip the first store read.
    fresh: bool,
    over: bool,
}

pub(super) fn respond(
    state: HttpState,
    inbox_id: i64,
    fresh: bool,
    deltas: broadcast::Receiver<StreamEvent>,
    finished: broadcast::Receiver<i64>,
) -> Response {
    let deadline =
        tokio::time::Instant::now() + Duration::from_secs(state.config.web.reply_timeout_secs);
    let run = Run {
        state,
        inbox_id,
        watch: TurnWatch::new(inbox_id, deltas, finished),
        deadline,
        fresh,
        over: false,
    };
    Sse::new(events(run))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn events(run: Run) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold(run, |mut run| async move {
        if run.over {
            return None;
        }
        let event = run.next().await;
        Some((Ok(event), run))
    })
}

impl Run {
    async fn next(&mut self) -> Event {
        loop {
            if !self.fresh {
                if let Some(done) = self.done_if_settled().await {
                    self.over = true;
                    return done;
                }
            }
            self.fresh = false;
            if tokio::time::Instant::now() > self.deadline {
                self.over = true;
                return Event::default().event("done").data(
                    json!({
                        "error": "the reply is taking longer than web.reply_timeout_secs; it will appear in the lane's messages",
                        "inbox_id": self.inbox_id,
                    })
                    .to_string(),
                );
            }
            // Deltas until the turn's finish signal (or a poll interval: the turn may run on
            // another replica, whose deltas and signal never reach us).
            if let Some(event) = self.watch.next(|kind| Some(delta_event(kind))).await {
                return event;
            }
        }
    }

    /// The `done` event once the inbox row is settled.
    async fn done_if_settled(&self) -> Option<Event> {
        let row = match self.state.store.inbox_get(self.inbox_id).await {
            Ok(Some(row)) if row.status != InboxStatus::Pending => row,
            Ok(_) => return None,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read inbox while streaming a reply");
                return None;
            }
        };
        let resp = super::chat::reply(
            &*self.state.store,
            self.inbox_id,
            row.status,
            row.session_id,
            row.reply_message_id,
        )
        .await
        .into_response();
        let body = axum::body::to_bytes(resp.into_body(), super::MAX_BODY_BYTES * 16)
            .await
            .unwrap_or_default();
        Some(
            Event::default()
                .event("done")
                .data(String::from_utf8_lossy(&body)),
        )
    }
}

fn delta_event(kind: StreamKind) -> Event {
    match kind {
        StreamKind::Text(text) => Event::default()
            .event("delta")
            .data(json!({ "text": text }).to_string()),
        StreamKind::Reasoning(text) => Event::default()
            .event("reasoning")
            .data(json!({ "text": text }).to_string()),
        StreamKind::Restart => Event::default().event("reset").data("{}"),
    }
}
