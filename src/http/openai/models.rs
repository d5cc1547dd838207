//! `GET /v1/models`: the agents a key can talk to, one model per agent profile. Herald has one
//! profile today, `herald`; a request naming any other model is refused with a clear line.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use super::OaiError;
use crate::http::HttpState;

/// The model names the API answers to.
pub(super) fn names(_state: &HttpState) -> Vec<&'static str> {
    vec!["herald"]
}

/// The model a request names, if it is one of [`names`].
pub(super) fn check(state: &HttpState, model: &str) -> Result<(), OaiError> {
    if names(state).contains(&model) {
        return Ok(());
    }
    Err(OaiError::not_found(
        "model_not_found",
        format!(
            "the model {model:?} does not exist here; use one of {:?} (GET /v1/models)",
            names(state)
        ),
    ))
}

pub(super) async fn list(State(state): State<HttpState>) -> Json<Value> {
    let data: Vec<Value> = names(&state)
        .into_iter()
        .map(|id| json!({ "id": id, "object": "model", "created": 0, "owned_by": "herald" }))
        .collect();
    Json(json!({ "object": "list", "data": data }))
}
