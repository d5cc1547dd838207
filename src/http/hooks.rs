//! `POST /hooks/{name}`: an inbound webhook (`crate::webhooks` decides; this is its HTTP
//! face). The route's guard is `Signed`: the hook's own secret, checked on the raw body.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::HttpState;
use crate::webhooks::Answer;

pub(super) async fn receive(
    State(state): State<HttpState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let answer = match state.webhooks.receive(&name, &headers, &body).await {
        Ok(a) => a,
        Err(e) => {
            // Nothing was recorded: the sender retries.
            let body = Json(json!({ "error": format!("not recorded, try again: {e}") }));
            return (StatusCode::SERVICE_UNAVAILABLE, body).into_response();
        }
    };
    let status = StatusCode::from_u16(answer.status()).unwrap_or(StatusCode::BAD_REQUEST);
    let body = match &answer {
        Answer::Accepted { delivery } => json!({ "status": "accepted", "delivery": delivery }),
        Answer::Duplicate { delivery } => json!({ "status": "duplicate", "delivery": delivery }),
        Answer::Filtered { .. } => json!({ "status": "filtered" }),
        Answer::UnknownHook => json!({ "error": "no such hook" }),
        Answer::TooLarge { limit } => json!({ "error": format!("body over {limit} bytes") }),
        Answer::Unauthorized { why } => json!({ "error": why }),
        Answer::RateLimited => json!({ "error": "too many deliveries; retry in a minute" }),
        Answer::NotJson => json!({ "error": "the body is not JSON" }),
    };
    let mut resp = (status, Json(body)).into_response();
    if answer == Answer::RateLimited {
        resp.headers_mut()
            .insert("retry-after", axum::http::HeaderValue::from_static("60"));
    }
    resp
}
