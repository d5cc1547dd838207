//! Slack's Web API over our reqwest: one method call in, a typed answer (slack-morphism's
//! response models) or an [`ApiError`] out.
//!
//! Slack answers HTTP 200 with `{"ok":false,"error":"<code>"}` for refusals and HTTP 429 with
//! `Retry-After` when a method's tier is exhausted; both become [`ApiError`]s here so that the
//! callers map them once (`outbound.rs` onto `SendError`). Write methods take JSON bodies; the
//! read methods and the file upload methods take form or query parameters, as Slack requires.
//!
//! Must not: retry on its own (the outbox sender owns retries), or put a token into an error
//! (they travel in the `Authorization` header only; errors carry the method and Slack's code).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// How long one call may take, connect to body.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The wait when a 429 carries no readable `Retry-After`.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// HTTP 429 (or `ratelimited`): wait this long before calling the method again.
    #[error("slack {method}: rate limited, retry after {after:?}")]
    RateLimited { method: String, after: Duration },
    /// Slack refused the call with one of its error codes.
    #[error("slack {method}: {code}")]
    Refused { method: String, code: String },
    /// Network trouble, a timeout or a 5xx.
    #[error("slack {method}: {detail}")]
    Unavailable { method: String, detail: String },
    /// An answer that is not what the method documents.
    #[error("slack {method}: unreadable answer: {detail}")]
    Unreadable { method: String, detail: String },
}

impl ApiError {
    /// Slack's error code, when it refused the call.
    pub fn code(&self) -> Option<&str> {
        match self {
            ApiError::Refused { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The token is wrong, revoked or of the wrong kind: nothing works until an operator acts.
    pub fn is_auth(&self) -> bool {
        matches!(
            self.code(),
            Some(
                "invalid_auth"
                    | "not_authed"
                    | "token_revoked"
                    | "token_expired"
                    | "account_inactive"
                    | "not_allowed_token_type"
            )
        )
    }
}

/// One Web API base and the HTTP client; tokens are passed per call (bot or app-level).
#[derive(Clone)]
pub struct SlackApi {
    http: reqwest::Client,
    base: String,
}

impl std::fmt::Debug for SlackApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackApi")
            .field("base", &self.base)
            .finish()
    }
}

/// An answer that was `ok`, with the scopes the token holds (`x-oauth-scopes`, when sent).
pub struct Answer<T> {
    pub body: T,
    pub scopes: Option<String>,
}

impl SlackApi {
    pub fn new(api_url: &str) -> anyhow::Result<SlackApi> {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(SlackApi {
            http,
            base: api_url.trim_end_matches('/').to_string(),
        })
    }

    /// A write method with a JSON body.
    pub async fn post<R: DeserializeOwned>(
        &self,
        method: &str,
        token: &str,
        body: &impl Serialize,
    ) -> Result<R, ApiError> {
        let req = self.request(method, token).json(body);
        self.send(method, req).await.map(|a| a.body)
    }

    /// A method that takes form parameters (reads, uploads, apps.connections.open).
    pub async fn form<R: DeserializeOwned>(
        &self,
        method: &str,
        token: &str,
        params: &[(&str, String)],
    ) -> Result<R, ApiError> {
        let req = self.form_request(method, token, params);
        self.send(method, req).await.map(|a| a.body)
    }

    /// `form` that also returns the token's scopes (auth.test for the doctor).
    pub async fn form_with_scopes<R: DeserializeOwned>(
        &self,
        method: &str,
        token: &str,
        params: &[(&str, String)],
    ) -> Result<Answer<R>, ApiError> {
        let req = self.form_request(method, token, params);
        self.send(method, req).await
    }

    /// Raw bytes to an upload URL that `files.getUploadURLExternal` gave.
    pub async fn upload(&self, url: &str, token: &str, bytes: Vec<u8>) -> Result<(), ApiError> {
        let method = "file upload";
        let res = self
            .http
            .post(url)
            .bearer_auth(token)
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(bytes)
            .send()
            .await
            .map_err(|e| unavailable(method, &e))?;
        let status = res.status();
        if status.as_u16() == 429 {
            return Err(ApiError::RateLimited {
                method: method.into(),
                after: retry_after(res.headers()),
            });
        }
        if !status.is_success() {
            return Err(ApiError::Unavailable {
                method: method.into(),
                detail: format!("HTTP {status}"),
            });
        }
        Ok(())
    }

    /// Answers a press or a command on its `response_url` (no token: the URL is the
    /// credential). Only Slack's hook host or the API's own host is called.
    pub async fn respond(&self, url: &str, body: &Value) -> Result<(), ApiError> {
        let method = "response_url";
        let parsed = url::Url::parse(url).ok();
        let host = parsed.as_ref().and_then(|u| u.host_str());
        let api_host = url::Url::parse(&self.base).ok();
        let ours = host == Some("hooks.slack.com")
            || (host.is_some() && host == api_host.as_ref().and_then(|u| u.host_str()));
        if !ours {
            return Err(ApiError::Refused {
                method: method.into(),
                code: "response_url_not_slacks".into(),
            });
        }
        let res = self
            .http
            .post(url)
            .json(body)
            .send()
            .await
            .map_err(|e| unavailable(method, &e))?;
        if !res.status().is_success() {
            return Err(ApiError::Unavailable {
                method: method.into(),
                detail: format!("HTTP {}", res.status()),
            });
        }
        Ok(())
    }

    fn request(&self, method: &str, token: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/{method}", self.base))
            .bearer_auth(token)
    }

    /// A form-encoded body (`application/x-www-form-urlencoded`), as Slack's read methods take.
    fn form_request(
        &self,
        method: &str,
        token: &str,
        params: &[(&str, String)],
    ) -> reqwest::RequestBuilder {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        self.request(method, token)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
    }

    async fn send<R: DeserializeOwned>(
        &self,
        method: &str,
        req: reqwest::RequestBuilder,
    ) -> Result<Answer<R>, ApiError> {
        let res = req.send().await.map_err(|e| unavailable(method, &e))?;
        let status = res.status();
        if status.as_u16() == 429 {
            return Err(ApiError::RateLimited {
                method: method.into(),
                after: retry_after(res.headers()),
            });
        }
        if status.is_server_error() {
            return Err(ApiError::Unavailable {
                method: method.into(),
                detail: format!("HTTP {status}"),
            });
        }
        let scopes = res
            .headers()
            .get("x-oauth-scopes")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let value: Value = res.json().await.map_err(|e| ApiError::Unreadable {
            method: method.into(),
            detail: format!("HTTP {status}, not JSON: {}", e.without_url()),
        })?;
        read_answer(method, value).map(|body| Answer { body, scopes })
    }
}

/// `{"ok":true,…}` → the typed body; `{"ok":false,"error":…}` → `Refused` (or `RateLimited`
/// for `ratelimited` without a 429).
pub fn read_answer<R: DeserializeOwned>(method: &str, value: Value) -> Result<R, ApiError> {
    if value.get("ok").and_then(Value::as_bool) != Some(true) {
        let code = value
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown_error")
            .to_string();
        if code == "ratelimited" {
            return Err(ApiError::RateLimited {
                method: method.into(),
                after: DEFAULT_RETRY_AFTER,
            });
        }
        return Err(ApiError::Refused {
            method: method.into(),
            code,
        });
    }
    serde_json::from_value(value).map_err(|e| ApiError::Unreadable {
        method: method.into(),
        detail: e.to_string(),
    })
}

fn unavailable(method: &str, e: &reqwest::Error) -> ApiError {
    // An upload URL carries a one-time ticket: no URL in the text.
    let mut detail = e.to_string();
    if let Some(url) = e.url() {
        detail = detail.replace(url.as_str(), "<url>");
    }
    ApiError::Unavailable {
        method: method.into(),
        detail,
    }
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Duration {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_RETRY_AFTER, Duration::from_secs)
}
