//! `[eval]`: what `herald eval` needs beyond the agent's own configuration — the judge model
//! that answers a case's `judge` question (docs/evals.md).

use serde::{Deserialize, Serialize};

use super::Endpoint;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvalConfig {
    /// The judge model and its fallbacks, tried in order (entries as in `llm.fallbacks`).
    /// Empty: the agent's own `[llm]` chain judges.
    pub judge: Vec<Endpoint>,
}
