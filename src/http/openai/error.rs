//! Errors in OpenAI's shape (`{"error": {"message", "type", "code"}}`), so an OpenAI client
//! raises the exception its users expect (`AuthenticationError`, `RateLimitError`, …).

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

#[derive(Debug, Clone)]
pub(crate) struct OaiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub code: &'static str,
    /// Sent as `retry-after` (seconds) on a 429 or 503.
    pub retry_after: Option<Duration>,
}

impl OaiError {
    fn new(status: StatusCode, kind: &'static str, code: &'static str, m: String) -> OaiError {
        OaiError {
            status,
            message: m,
            kind,
            code,
            retry_after: None,
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> OaiError {
        let m = message.into();
        OaiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "invalid_api_key",
            m,
        )
    }

    pub fn bad_request(message: impl Into<String>) -> OaiError {
        let m = message.into();
        OaiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_request",
            m,
        )
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> OaiError {
        let m = message.into();
        OaiError::new(StatusCode::NOT_FOUND, "invalid_request_error", code, m)
    }

    pub fn forbidden(message: impl Into<String>) -> OaiError {
        let m = message.into();
        OaiError::new(StatusCode::FORBIDDEN, "permission_error", "not_allowed", m)
    }

    /// The budget refused the turn: a cap holds until its period turns or an approver
    /// extends it, so the client is told to come back in an hour, not in seconds.
    pub fn over_budget(message: impl Into<String>) -> OaiError {
        let m = message.into();
        let mut e = OaiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "insufficient_quota",
            "insufficient_quota",
            m,
        );
        e.retry_after = Some(Duration::from_secs(3600));
        e
    }

    pub fn rate_limited(message: impl Into<String>, after: Duration) -> OaiError {
        let m = message.into();
        let mut e = OaiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "rate_limit_exceeded",
            m,
        );
        e.retry_after = Some(after);
        e
    }

    /// The request's body did not arrive in time (`server.body_timeout_secs`).
    pub fn request_timeout(message: impl Into<String>) -> OaiError {
        let m = message.into();
        OaiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            "request_timeout",
            m,
        )
    }

    pub fn unavailable(message: impl Into<String>) -> OaiError {
        let m = message.into();
        let mut e = OaiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "model_unavailable",
            m,
        );
        e.retry_after = Some(Duration::from_secs(5));
        e
    }

    /// The JSON body, also sent as the `error` of a stream that fails after it started.
    pub fn body(&self) -> serde_json::Value {
        json!({ "error": { "message": self.message, "type": self.kind, "code": self.code } })
    }
}

impl IntoResponse for OaiError {
    fn into_response(self) -> Response {
        let mut res = (self.status, Json(self.body())).into_response();
        if let Some(after) = self.retry_after {
            let secs = after.as_secs().max(1).to_string();
            if let Ok(v) = HeaderValue::from_str(&secs) {
                res.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        res
    }
}
