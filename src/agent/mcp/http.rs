//! The streamable-HTTP client, watched: reqwest underneath (rmcp's own implementation), with
//! every answer to a request checked for the signs of a lost session, and the raw `tools/list`
//! answer read for what rmcp's `Tool` drops.
//!
//! rmcp re-initializes only when a stale session gets a 404. Real servers also answer it with a
//! 400 whose JSON-RPC error carries no `id` (server-everything does): that answer matches no
//! request, so the call would wait out its whole time-out, and so would every later one. Here
//! such an answer — and any transport failure of a request — wakes `suspect`, and the
//! connection task drops the session and starts a new one at once.
//!
//! rmcp hands a JSON answer over already parsed, without `execution.taskSupport`; so a
//! `tools/list` request is posted here, and its answer — a JSON body or an SSE stream — is shown
//! to [`TaskOnly`] as text before rmcp parses it. Any other answer to it (an error status, an
//! unexpected content type, a failed connection) is left to rmcp: the request is posted again
//! through rmcp's client, which is safe because listing tools changes nothing on a server.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::StreamExt;
use reqwest::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};
use tokio::sync::Notify;

use super::task_only::TaskOnly;

/// reqwest, plus a bell rung when a session looks lost, plus the task-only filter the raw
/// `tools/list` answers feed.
#[derive(Clone)]
pub struct Watched {
    pub inner: reqwest::Client,
    pub suspect: Arc<Notify>,
    pub task_only: Arc<TaskOnly>,
}

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

impl Watched {
    /// Rings the bell when a request got an answer that can never be matched to it.
    fn check(&self, message: &ClientJsonRpcMessage, result: &PostResult) {
        let ClientJsonRpcMessage::Request(req) = message else {
            return;
        };
        let lost = match result {
            Ok(StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Error(e), _)) => {
                e.id.as_ref() != Some(&req.id)
            }
            Ok(_) => false,
            Err(StreamableHttpError::SessionExpired) => false, // rmcp re-initializes itself.
            Err(_) => true,
        };
        if lost {
            tracing::debug!(
                "an MCP HTTP request got an answer that matches no request; the session is suspect"
            );
            self.suspect.notify_one();
        }
    }

    /// Posts a `tools/list` request and shows its answer to [`TaskOnly`]: a 2xx JSON body (read
    /// whole, within the JSON limit) or a 2xx SSE stream (each event's data, the stream within
    /// the event-size limit). `None` for any other answer, which rmcp then gets to handle.
    async fn post_tools_list(
        &self,
        uri: &str,
        message: &ClientJsonRpcMessage,
        session_id: Option<&str>,
        auth_header: Option<&str>,
        custom_headers: &HashMap<HeaderName, HeaderValue>,
        limits: &StreamableHttpResponseLimits,
    ) -> Option<PostResult> {
        let mut request = self.inner.post(uri).header(
            ACCEPT,
            format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
        );
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(id) = session_id {
            request = request.header(HEADER_SESSION_ID, id);
        }
        let response = request.json(message).send().await.ok()?;
        if response.status() != reqwest::StatusCode::OK {
            return None;
        }
        let session = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|ct| ct.split(';').next())
            .map(|t| t.trim().to_ascii_lowercase())
            .unwrap_or_default();
        if kind == JSON_MIME_TYPE {
            let body = match read_capped(response, limits.max_json_response_size).await {
                Ok(body) => body,
                Err(e) => return Some(Err(e)),
            };
            self.task_only.see_text(&String::from_utf8_lossy(&body));
            let parsed = serde_json::from_slice::<ServerJsonRpcMessage>(&body).map_err(|e| {
                StreamableHttpError::UnexpectedServerResponse(
                    format!("the tools/list answer is not JSON-RPC: {e}").into(),
                )
            });
            let result = parsed.map(|m| StreamableHttpPostResponse::Json(m, session));
            self.check(message, &result);
            Some(result)
        } else if kind == EVENT_STREAM_MIME_TYPE {
            let events = tapped_events(response, limits.max_sse_event_size, self.task_only.clone());
            Some(Ok(StreamableHttpPostResponse::Sse(events, session)))
        } else {
            None
        }
    }
}

impl StreamableHttpClient for Watched {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> PostResult {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> PostResult {
        let lists_tools = matches!(
            &message,
            ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::ListToolsRequest(_))
        );
        if lists_tools {
            let tapped = self
                .post_tools_list(
                    &uri,
                    &message,
                    session_id.as_deref(),
                    auth_header.as_deref(),
                    &custom_headers,
                    &limits,
                )
                .await;
            if let Some(result) = tapped {
                return result;
            }
        }
        let result = self
            .inner
            .post_message_with_response_limits(
                uri,
                message.clone(),
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.check(&message, &result);
        result
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<reqwest::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<reqwest::Error>>
    {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<reqwest::Error>>
    {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// A body of at most `max` bytes, or `ResponseBodyTooLarge`.
async fn read_capped(
    response: reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, StreamableHttpError<reqwest::Error>> {
    let too_large = StreamableHttpError::ResponseBodyTooLarge { max_size: max };
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_large);
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if chunk.len() > max - body.len() {
            return Err(too_large);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The answer's SSE events, each event's data shown to `task_only` on its way to rmcp. The
/// stream ends in an error once more than `max` bytes came: a `tools/list` stream carries its
/// answer and perhaps a few notifications, never more than one message's limit.
fn tapped_events(
    response: reqwest::Response,
    max: usize,
    task_only: Arc<TaskOnly>,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let bytes = response
        .bytes_stream()
        .scan(Some(0usize), move |seen, chunk| {
            let item = match (chunk, *seen) {
                (_, None) => return futures::future::ready(None),
                (Ok(c), Some(n)) if c.len() <= max.saturating_sub(n) => {
                    *seen = Some(n + c.len());
                    Ok(c)
                }
                (Ok(_), Some(_)) => {
                    *seen = None;
                    Err(std::io::Error::other(format!(
                        "the tools/list stream was longer than {max} bytes"
                    )))
                }
                (Err(e), Some(_)) => {
                    *seen = None;
                    Err(std::io::Error::other(e))
                }
            };
            futures::future::ready(Some(item))
        });
    SseStream::from_bytes_stream(bytes)
        .inspect(move |event| {
            if let Ok(Sse {
                data: Some(data), ..
            }) = event
            {
                task_only.see_text(data);
            }
        })
        .boxed()
}
