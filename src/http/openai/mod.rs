//! The OpenAI-compatible API: `GET /v1/models`, `POST /v1/chat/completions`,
//! `POST /v1/responses`, for Open WebUI, editor plugins and the `openai` SDK.
//!
//! Each route answers only an `[[api.keys]]` key (`keys.rs`) and acts as that key's person. A
//! request is one turn on the durable path every platform takes (`turn.rs`): the inbox, the
//! lane's lease, the agent with its tools, memory and approvals, the outbox. Errors come in
//! OpenAI's shape (`error.rs`).

mod chat;
mod error;
mod input;
mod keys;
mod models;
mod responses;
mod stream;
mod turn;

use axum::http::Method;
use axum::routing::{get, post};
use serde::de::DeserializeOwned;

pub(crate) use error::OaiError;
pub(crate) use keys::require;
pub use keys::{ApiKeys, KeyCaller};

use super::{row, Guard, RouteRow};

/// The API's routes, when `api.enabled`.
pub(super) fn rows() -> Vec<RouteRow> {
    vec![
        row(Method::GET, "/v1/models", Guard::ApiKey, get(models::list)),
        row(
            Method::POST,
            "/v1/chat/completions",
            Guard::ApiKey,
            post(chat::completions),
        ),
        row(
            Method::POST,
            "/v1/responses",
            Guard::ApiKey,
            post(responses::create),
        ),
    ]
}

/// A request body as `T`, or a 400 that says what is wrong with it.
fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, OaiError> {
    serde_json::from_slice(body)
        .map_err(|e| OaiError::bad_request(format!("the body is not a valid request: {e}")))
}
