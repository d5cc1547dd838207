//! signal-cli's JSON-RPC over our reqwest: one call (`POST <url>/api/v1/rpc`, a JSON-RPC 2.0
//! request) in, its `result` or an [`RpcError`] out.
//!
//! signal-cli answers HTTP 200 for its own errors, with the code in the body: -1 a user error
//! (an unregistered recipient, an unknown group, an empty message), -3 an I/O error, -4 an
//! untrusted identity, -5 a rate limit (the per-recipient results in `error.data.response`
//! carry `retryAfterSeconds`), -32601 a method this daemon does not have, -32602/-32600 bad
//! parameters, -32603 anything unexpected (a network failure while sending included). They
//! become [`RpcError`]s here so that callers map them once.
//!
//! Must not: retry on its own (the outbox sender owns retries), or put a message's text into
//! an error (errors carry the method, the code and signal-cli's message).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

/// How long one call may take (a send with a large attachment included).
const TIMEOUT: Duration = Duration::from_secs(60);
/// The wait when a rate limit names none.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RpcError {
    /// Error -5: Signal's rate limit; wait this long before sending again.
    #[error("signal-cli {method}: rate limited, retry after {after:?}")]
    RateLimited { method: String, after: Duration },
    /// signal-cli refused the call with one of its codes.
    #[error("signal-cli {method}: error {code}: {message}")]
    Refused {
        method: String,
        code: i64,
        message: String,
    },
    /// The daemon could not be reached, timed out, or answered with an HTTP error.
    #[error("signal-cli {method}: {detail}")]
    Unavailable { method: String, detail: String },
    /// An answer that is not JSON-RPC.
    #[error("signal-cli {method}: unreadable answer: {detail}")]
    Unreadable { method: String, detail: String },
}

impl RpcError {
    pub fn code(&self) -> Option<i64> {
        match self {
            RpcError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// The daemon's address and our HTTP client.
#[derive(Clone)]
pub struct SignalRpc {
    http: reqwest::Client,
    base: String,
    next_id: std::sync::Arc<AtomicU64>,
}

impl std::fmt::Debug for SignalRpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignalRpc")
            .field("base", &self.base)
            .finish()
    }
}

impl SignalRpc {
    pub fn new(url: &str) -> anyhow::Result<SignalRpc> {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(SignalRpc {
            http,
            base: url.trim_end_matches('/').to_string(),
            next_id: Default::default(),
        })
    }

    /// `<url>/api/v1/events`, the event stream.
    pub fn events_url(&self) -> String {
        format!("{}/api/v1/events", self.base)
    }

    /// The client for the event stream: no overall timeout (the stream stays open).
    pub fn stream_client(&self) -> anyhow::Result<reqwest::Client> {
        Ok(reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()?)
    }

    /// Calls `method` with `params` (an object); the `result` on success.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": id});
        let res = self
            .http
            .post(format!("{}/api/v1/rpc", self.base))
            .json(&body)
            .send()
            .await
            .map_err(|e| RpcError::Unavailable {
                method: method.into(),
                detail: e.without_url().to_string(),
            })?;
        let status = res.status();
        if !status.is_success() {
            return Err(RpcError::Unavailable {
                method: method.into(),
                detail: format!("HTTP {status}"),
            });
        }
        let value: Value = res.json().await.map_err(|e| RpcError::Unreadable {
            method: method.into(),
            detail: format!("not JSON: {}", e.without_url()),
        })?;
        read_answer(method, value)
    }
}

/// A JSON-RPC response → its `result`, or the error it carries.
pub fn read_answer(method: &str, mut value: Value) -> Result<Value, RpcError> {
    if let Some(error) = value.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message")
            .to_string();
        if code == -5 {
            return Err(RpcError::RateLimited {
                method: method.into(),
                after: retry_after(error.get("data")),
            });
        }
        return Err(RpcError::Refused {
            method: method.into(),
            code,
            message,
        });
    }
    match value.get_mut("result") {
        Some(result) => Ok(result.take()),
        None => Err(RpcError::Unreadable {
            method: method.into(),
            detail: "neither result nor error".into(),
        }),
    }
}

/// The longest `retryAfterSeconds` among a refused send's results.
fn retry_after(data: Option<&Value>) -> Duration {
    data.and_then(|d| d.pointer("/response/results"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("retryAfterSeconds").and_then(Value::as_u64))
        .max()
        .map_or(DEFAULT_RETRY_AFTER, Duration::from_secs)
}

/// The `timestamp` of a send's result: the message's id on Signal.
pub fn sent_timestamp(method: &str, result: &Value) -> Result<u64, RpcError> {
    result
        .get("timestamp")
        .and_then(Value::as_u64)
        .ok_or_else(|| RpcError::Unreadable {
            method: method.into(),
            detail: "no timestamp in the result".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_as_signal_cli_writes_them() {
        let ok = json!({"jsonrpc":"2.0","result":{"timestamp":999,"results":[]},"id":4});
        assert_eq!(
            sent_timestamp("send", &read_answer("send", ok).unwrap()).unwrap(),
            999
        );
        let limited = json!({"jsonrpc":"2.0","id":5,"error":{"code":-5,
            "message":"Failed to send message due to rate limiting",
            "data":{"response":{"timestamp":1,"results":[
                {"recipientAddress":{"number":"+1"},"type":"RATE_LIMIT_FAILURE","retryAfterSeconds":7},
                {"recipientAddress":{"number":"+2"},"type":"RATE_LIMIT_FAILURE","retryAfterSeconds":3}]}}}});
        assert_eq!(
            read_answer("send", limited),
            Err(RpcError::RateLimited {
                method: "send".into(),
                after: Duration::from_secs(7)
            })
        );
        let bare = json!({"jsonrpc":"2.0","id":5,"error":{"code":-5,"message":"x","data":null}});
        assert!(matches!(
            read_answer("send", bare),
            Err(RpcError::RateLimited { after, .. }) if after == DEFAULT_RETRY_AFTER
        ));
        let user = json!({"jsonrpc":"2.0","id":6,"error":{"code":-1,
            "message":"The user +1 is not registered.","data":null}});
        assert_eq!(read_answer("send", user).unwrap_err().code(), Some(-1));
        assert!(read_answer("send", json!({"id":1})).is_err());
    }
}
