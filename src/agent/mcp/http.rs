//! The streamable-HTTP client, watched: reqwest underneath (rmcp's own implementation), with
//! every answer to a request checked for the signs of a lost session.
//!
//! rmcp re-initializes only when a stale session gets a 404. Real servers also answer it with a
//! 400 whose JSON-RPC error carries no `id` (server-everything does): that answer matches no
//! request, so the call would wait out its whole time-out, and so would every later one. Here
//! such an answer — and any transport failure of a request — wakes `suspect`, and the
//! connection task drops the session and starts a new one at once.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use tokio::sync::Notify;

/// reqwest, plus a bell rung when a session looks lost.
#[derive(Clone)]
pub struct Watched {
    pub inner: reqwest::Client,
    pub suspect: Arc<Notify>,
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
