//! Herald: a messaging gateway daemon for an AI agent.
//!
//! The crate is a library so that tests, benchmarks and the `herald` binary all drive the same
//! core through [`app::run`]. See `docs/ARCHITECTURE.md` for the map.

pub mod adapters;
pub mod agent;
pub mod app;
pub mod budget;
pub mod cli;
pub mod config;
pub mod cron;
pub mod delivery;
pub mod domain;
pub mod eval;
mod events;
pub mod handoff;
pub mod hooks;
pub mod http;
pub mod lanes;
pub mod llm;
pub mod media;
pub mod net;
pub mod reload;
pub mod screen;
pub mod store;
pub mod tasks;
pub mod telemetry;
pub mod toolset;
pub mod webhooks;

/// The platform registry (`config::registry`) reads the adapters' list through the crate root.
pub use adapters::PLATFORMS;

/// The seeded generator of the unit tests (`herald-test-rng`, a dev-dependency without herald
/// in it), the same one `tests/` and `examples/` get through `herald_test_support::rng`.
#[cfg(test)]
use herald_test_rng as test_rng;
