//! The web chat page's live view of a lane, read from the store so that it shows whatever
//! replica ran the turn: `GET /api/v1/lanes/{lane}/events` replays the lane's messages after
//! the last one the client saw (`?after=ID` or `Last-Event-ID`) as server-sent events, then
//! polls for new ones; and the lane's earlier sessions, to read.
//!
//! Only what a person would call the conversation is shown: their requests and the agent's
//! answers. Tool traffic, compaction carriers and the synthetic user rows that keep a mirrored
//! brief in alternation are left out; a scheduled brief is the agent's message, labelled.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::Stream;
use serde::{Deserialize, Serialize};

use super::{ApiError, HttpState};
use crate::domain::{LaneKey, Role, SessionId};
use crate::store::{StoreError, StoredMessage};

/// How often an open stream looks at the store for new messages.
const POLL: Duration = Duration::from_millis(700);
/// Sessions listed for a lane, newest first.
const SESSIONS_SHOWN: i64 = 50;

/// One message as the page draws it.
#[derive(Serialize, Debug, PartialEq)]
pub(super) struct PageMessage {
    pub id: i64,
    /// `user` or `assistant`.
    pub role: Role,
    /// `message`, or `brief` (a scheduled delivery) / `relayed` (sent here from another
    /// conversation), whose `label` says from where.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    pub content: String,
    pub session_id: SessionId,
    /// The id the client chose for the message it sent (`client_id`), on a person's row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    pub created_at: i64,
    /// Files sent with an answer; the page fetches each from its `url`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PageFile>,
}

/// A file of an answer as the page shows it.
#[derive(Serialize, Debug, PartialEq)]
pub(super) struct PageFile {
    /// The short id the model named it by.
    pub id: String,
    pub mime: Option<String>,
    pub name: Option<String>,
    /// `/api/v1/lanes/{lane}/media/{sha}` (same guard as the chat).
    pub url: String,
}

/// The files an answer row carries, for the page of `lane`.
fn page_files(lane: &str, m: &StoredMessage) -> Vec<PageFile> {
    if m.role != Role::Assistant {
        return Vec::new();
    }
    m.media
        .iter()
        .filter_map(|a| {
            let sha = a.file_sha()?;
            Some(PageFile {
                id: crate::domain::short_id(sha).to_string(),
                mime: a.mime.clone(),
                name: a.name.clone(),
                url: format!(
                    "/api/v1/lanes/{}/media/{sha}",
                    url::form_urlencoded::byte_serialize(lane.as_bytes()).collect::<String>()
                ),
            })
        })
        .collect()
}

/// The row as the page shows it, or `None` for rows that are not part of the conversation.
pub(super) fn page_message(lane: &LaneKey, m: &StoredMessage) -> Option<PageMessage> {
    let (kind, label, content) = match m.role {
        Role::User if m.is_person_request() => ("message", None, m.content.clone()),
        Role::Assistant if m.tool_calls.is_empty() => {
            match mirrored(&m.content, "[Delivered scheduled brief \"", "\"]\n") {
                Some((label, text)) => ("brief", Some(label), text),
                None => match mirrored(&m.content, "[Sent here at the request of ", "]\n") {
                    Some((from, text)) => ("relayed", Some(from), text),
                    None => ("message", None, m.content.clone()),
                },
            }
        }
        _ => return None,
    };
    Some(PageMessage {
        id: m.id,
        role: m.role,
        kind,
        label,
        content,
        session_id: m.session_id.clone(),
        client_id: m
            .platform_message_id
            .clone()
            .filter(|_| m.role == Role::User),
        created_at: m.created_at,
        files: page_files(lane.as_str(), m),
    })
}

/// Splits the header the lane worker writes on a mirrored delivery (`control.rs`).
fn mirrored(content: &str, open: &str, close: &str) -> Option<(String, String)> {
    let rest = content.strip_prefix(open)?;
    let (label, text) = rest.split_once(close)?;
    (!label.contains('\n')).then(|| (label.to_string(), text.to_string()))
}

#[derive(Deserialize)]
pub(super) struct After {
    after: Option<i64>,
}

/// `GET /api/v1/lanes/{lane}/events`: the lane's conversation as server-sent events (`message`
/// with a [`PageMessage`] whose id is the event id; `session` when a new session starts).
pub(super) async fn lane_events(
    State(state): State<HttpState>,
    Path(lane): Path<String>,
    Query(q): Query<After>,
    headers: HeaderMap,
) -> Response {
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok());
    let feed = Feed {
        stop: state.lanes.stopping(),
        state,
        lane: LaneKey::parse(&lane),
        after: resume.or(q.after).unwrap_or(0),
        session: None,
        queue: Vec::new(),
        first: true,
    };
    Sse::new(events(feed))
        .keep_alive(KeepAlive::default())
        .into_response()
}

struct Feed {
    state: HttpState,
    /// The daemon is shutting down: the stream ends (the client resumes elsewhere or later).
    stop: tokio_util::sync::CancellationToken,
    lane: LaneKey,
    /// The last message id sent.
    after: i64,
    /// The session whose messages were read last.
    session: Option<SessionId>,
    queue: Vec<Event>,
    first: bool,
}

fn events(feed: Feed) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::unfold(feed, |mut feed| async move {
        loop {
            if !feed.queue.is_empty() {
                let ev = feed.queue.remove(0);
                return Some((Ok(ev), feed));
            }
            if feed.stop.is_cancelled() {
                return None;
            }
            if !feed.first {
                crate::tasks::sleep_or_cancel(POLL, &feed.stop).await.ok()?;
            }
            feed.first = false;
            if let Err(e) = feed.read().await {
                tracing::warn!(error = %e, "cannot read a lane for the web chat's stream");
            }
        }
    })
}

impl Feed {
    /// Queues what is new since the last read: the rest of a session that just ended, a
    /// `session` event for a new one, its messages after `after`.
    async fn read(&mut self) -> Result<(), StoreError> {
        let store = &self.state.store;
        let current = store.session_current(&self.lane).await?.map(|s| s.id);
        let mut ids = Vec::new();
        match &self.session {
            // A resumed stream: the sessions it saw last may have ended since.
            None if self.after > 0 => {
                let recent = store.sessions_list(Some(&self.lane), 3).await?;
                ids.extend(recent.into_iter().rev().map(|s| s.id));
                ids.retain(|id| Some(id) != current.as_ref());
            }
            None => {}
            Some(old) if Some(old) != current.as_ref() => ids.push(old.clone()),
            Some(_) => {}
        }
        let rotated = self.session.is_some() && current.is_some() && current != self.session;
        if let Some(c) = &current {
            ids.push(c.clone());
        }
        for id in ids {
            if rotated && Some(&id) == current.as_ref() {
                self.queue.push(
                    Event::default()
                        .event("session")
                        .data(serde_json::json!({ "session_id": id }).to_string()),
                );
            }
            for m in store.messages(&id, true).await? {
                if m.id <= self.after {
                    continue;
                }
                self.after = m.id;
                if let Some(p) = page_message(&self.lane, &m) {
                    let data = serde_json::to_string(&p).unwrap_or_default();
                    self.queue.push(
                        Event::default()
                            .event("message")
                            .id(m.id.to_string())
                            .data(data),
                    );
                }
            }
        }
        if current.is_some() {
            self.session = current;
        }
        Ok(())
    }
}

#[derive(Serialize)]
struct SessionItem {
    id: SessionId,
    started_at: i64,
    ended_at: Option<i64>,
    end_reason: Option<String>,
    open: bool,
}

/// `GET /api/v1/lanes/{lane}/sessions`: the lane's sessions, newest first.
pub(super) async fn lane_sessions(
    State(state): State<HttpState>,
    Path(lane): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let lane = LaneKey::parse(&lane);
    let sessions: Vec<SessionItem> = state
        .store
        .sessions_list(Some(&lane), SESSIONS_SHOWN)
        .await?
        .into_iter()
        .map(|s| SessionItem {
            open: s.ended_at.is_none(),
            id: s.id,
            started_at: s.started_at,
            ended_at: s.ended_at,
            end_reason: s.end_reason,
        })
        .collect();
    Ok(Json(
        serde_json::json!({ "lane": lane, "sessions": sessions }),
    ))
}

/// `GET /api/v1/lanes/{lane}/sessions/{id}/messages`: one session of the lane, to read (its
/// compacted rows too: the whole conversation as it was).
pub(super) async fn session_messages(
    State(state): State<HttpState>,
    Path((lane, id)): Path<(String, SessionId)>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let lane = LaneKey::parse(&lane);
    let session = match state.store.session_get(&id).await? {
        Some(s) if s.lane == lane.as_str() => s,
        _ => {
            return Err(ApiError::not_found(format!(
                "no session {id} in the lane {lane}"
            )))
        }
    };
    let rows = state.store.messages(&session.id, false).await?;
    let messages: Vec<PageMessage> = rows.iter().filter_map(|m| page_message(&lane, m)).collect();
    Ok(Json(serde_json::json!({
        "lane": lane,
        "session_id": session.id,
        "started_at": session.started_at,
        "ended_at": session.ended_at,
        "messages": messages,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrored_headers_table() {
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            (
                "[Delivered scheduled brief \"morning\"]\nRain today.",
                Some(("morning", "Rain today.")),
            ),
            ("[Delivered scheduled brief \"a\nb\"]\nx", None),
            ("plain answer", None),
            ("[Delivered scheduled brief \"x\"] no newline", None),
        ];
        for (text, want) in cases {
            let got = mirrored(text, "[Delivered scheduled brief \"", "\"]\n");
            assert_eq!(
                got,
                want.map(|(a, b)| (a.to_string(), b.to_string())),
                "{text:?}"
            );
        }
    }
}
