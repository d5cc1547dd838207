//! Test support, one dev-only crate shared by the integration tests (`tests/it/`), the examples
//! and the load bench: fake servers that speak the real wire formats, the harnesses that start
//! the real daemon core (or the real `herald` binary) against them, the store runners for both
//! backends, the invariants of the pure rules, and the seeded fidelity transcripts.
//!
//! It exists so that this code is compiled once, not included by `#[path]` into every test
//! binary. It depends on herald, so herald's own unit tests (`cfg(test)` in src/) must not use
//! it: they would see a second herald. They take the generator from `herald-test-rng`, which
//! this crate re-exports as [`rng`]. It must not reach into the daemon's memory beyond herald's
//! public API.
//!
//! Without the default `fakes` feature only [`invariants`] and [`rng`] are built (fuzz/ uses
//! that).

#[cfg(feature = "fakes")]
pub mod backends;
#[cfg(feature = "fakes")]
pub mod db;
#[cfg(feature = "fakes")]
pub mod fake_anthropic;
#[cfg(feature = "fakes")]
pub mod fake_discord;
#[cfg(feature = "fakes")]
pub mod fake_email;
#[cfg(feature = "fakes")]
pub mod fake_llm;
#[cfg(feature = "fakes")]
pub mod fake_search;
#[cfg(feature = "fakes")]
pub mod fake_signal;
#[cfg(feature = "fakes")]
pub mod fake_slack;
#[cfg(feature = "fakes")]
pub mod fake_stt;
#[cfg(feature = "fakes")]
pub mod fake_telegram;
#[cfg(feature = "fakes")]
pub mod fake_tts;
#[cfg(feature = "fakes")]
pub mod fake_web;
#[cfg(feature = "fakes")]
pub mod fake_whatsapp;
#[cfg(feature = "fakes")]
pub mod fidelity;
#[cfg(feature = "fakes")]
pub mod handoff;
#[cfg(feature = "fakes")]
pub mod harness;
#[cfg(feature = "fakes")]
pub mod herald;
#[cfg(feature = "fakes")]
pub mod hostile;
pub mod invariants;
#[cfg(feature = "fakes")]
pub mod mcp;
#[cfg(feature = "fakes")]
pub mod multipart;
#[cfg(feature = "fakes")]
pub mod pdf;
#[cfg(feature = "fakes")]
pub mod promise;
#[cfg(feature = "fakes")]
pub mod recorder;
pub mod skip;
#[cfg(feature = "fakes")]
pub mod slow_body;
#[cfg(feature = "fakes")]
pub mod synapse;
#[cfg(feature = "fakes")]
pub mod telegram;
#[cfg(feature = "fakes")]
pub mod telegram_load;
#[cfg(feature = "fakes")]
pub mod webdriver;

pub use herald_test_rng as rng;
pub use skip::skip_or_fail;
