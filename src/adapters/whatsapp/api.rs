//! The Cloud API (Graph) over our reqwest: a JSON POST to `/{phone-number-id}/messages`, a
//! multipart upload to `/{phone-number-id}/media`, a GET of a node, each answering a typed
//! value or an [`ApiError`].
//!
//! Graph refuses with an HTTP 4xx (429 for throughput) and
//! `{"error":{"message","type","code","error_subcode","fbtrace_id"}}`; the code is what the
//! callers branch on (`outbound.rs` maps it once onto `SendError`).
//!
//! Must not: retry on its own (the outbox sender owns retries), or put the token into an error
//! (it travels in the `Authorization` header only; errors carry the call and Meta's code).

use std::time::Duration;

use serde_json::Value;

/// How long one call may take, connect to body.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The wait when a throughput refusal carries no readable `Retry-After`: Meta asks to back off
/// without saying how long.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(4);

/// Graph error codes Herald branches on.
pub mod code {
    /// The access token expired, was revoked or is not a token.
    pub const INVALID_TOKEN: i64 = 190;
    /// A parameter Graph does not accept (a bad number, an unknown media id).
    pub const INVALID_PARAMETER: i64 = 100;
    /// Cloud API throughput reached for the number.
    pub const RATE_LIMIT: i64 = 130429;
    /// Too many messages to one person in a short time.
    pub const PAIR_RATE_LIMIT: i64 = 131056;
    /// More than 24 hours since the person last wrote: only templates go out.
    pub const REENGAGEMENT: i64 = 131047;
    /// Meta's side had trouble; try again.
    pub const TEMPORARY: [i64; 3] = [1, 2, 131000];
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// Throughput refused (HTTP 429, code 130429 or 131056): wait this long.
    #[error("whatsapp {call}: rate limited (code {code}), retry after {after:?}")]
    RateLimited {
        call: String,
        code: i64,
        after: Duration,
    },
    /// Graph refused the call with one of its codes.
    #[error("whatsapp {call}: error {code}: {message}")]
    Refused {
        call: String,
        code: i64,
        message: String,
    },
    /// Network trouble, a timeout or a 5xx without a Graph error.
    #[error("whatsapp {call}: {detail}")]
    Unavailable { call: String, detail: String },
}

impl ApiError {
    pub fn code(&self) -> Option<i64> {
        match self {
            ApiError::Refused { code, .. } | ApiError::RateLimited { code, .. } => Some(*code),
            ApiError::Unavailable { .. } => None,
        }
    }

    /// The token is wrong or revoked: nothing works until an operator acts.
    pub fn is_auth(&self) -> bool {
        self.code() == Some(code::INVALID_TOKEN)
    }
}

#[derive(Clone)]
pub struct GraphApi {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl std::fmt::Debug for GraphApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphApi")
            .field("base", &self.base)
            .field("token", &"***")
            .finish()
    }
}

impl GraphApi {
    pub fn new(api_url: &str, token: &str) -> anyhow::Result<GraphApi> {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(GraphApi {
            http,
            base: api_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
        })
    }

    /// `POST /{node}/{edge}` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, ApiError> {
        let req = self.http.post(self.url(path)).json(body);
        self.send(path, req).await
    }

    /// `GET /{node}` (with `fields`, when given).
    pub async fn get(&self, path: &str, fields: Option<&str>) -> Result<Value, ApiError> {
        let mut url = self.url(path);
        if let Some(f) = fields {
            url = format!("{url}?fields={f}");
        }
        self.send(path, self.http.get(url)).await
    }

    /// `POST /{phone-number-id}/media` as multipart: `messaging_product`, `type` and the file.
    /// Returns the media id.
    pub async fn upload(
        &self,
        phone: &str,
        name: &str,
        mime: &str,
        bytes: Vec<u8>,
    ) -> Result<String, ApiError> {
        let path = format!("{phone}/media");
        let part = reqwest::multipart::Part::bytes(bytes)
            .file_name(name.to_string())
            .mime_str(mime)
            .map_err(|e| ApiError::Unavailable {
                call: path.clone(),
                detail: format!("bad MIME type: {e}"),
            })?;
        let form = reqwest::multipart::Form::new()
            .text("messaging_product", "whatsapp")
            .text("type", mime.to_string())
            .part("file", part);
        let answer = self
            .send(&path, self.http.post(self.url(&path)).multipart(form))
            .await?;
        answer
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| ApiError::Unavailable {
                call: path,
                detail: "no media id in the answer".into(),
            })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base, path.trim_start_matches('/'))
    }

    async fn send(&self, call: &str, req: reqwest::RequestBuilder) -> Result<Value, ApiError> {
        // Only the path's last segment names the call: the phone number id stays out of logs.
        let call = call.rsplit('/').next().unwrap_or(call).to_string();
        let res = req
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| ApiError::Unavailable {
                call: call.clone(),
                detail: e.without_url().to_string(),
            })?;
        let status = res.status();
        let after = retry_after(res.headers());
        let body: Option<Value> = res.json().await.ok();
        if status.is_success() {
            return body.ok_or_else(|| ApiError::Unavailable {
                call,
                detail: format!("HTTP {status}, not JSON"),
            });
        }
        let error = body.as_ref().and_then(|b| b.get("error"));
        let Some(code) = error.and_then(|e| e.get("code")).and_then(Value::as_i64) else {
            if status.as_u16() == 429 {
                return Err(ApiError::RateLimited {
                    call,
                    code: code::RATE_LIMIT,
                    after: after.unwrap_or(DEFAULT_RETRY_AFTER),
                });
            }
            return Err(ApiError::Unavailable {
                call,
                detail: format!("HTTP {status}"),
            });
        };
        if status.as_u16() == 429 || code == code::RATE_LIMIT || code == code::PAIR_RATE_LIMIT {
            return Err(ApiError::RateLimited {
                call,
                code,
                after: after.unwrap_or(DEFAULT_RETRY_AFTER),
            });
        }
        let message = error
            .and_then(|e| e.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("no message")
            .chars()
            .take(300)
            .collect();
        Err(ApiError::Refused {
            call,
            code,
            message,
        })
    }
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}
