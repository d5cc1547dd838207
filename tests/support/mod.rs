//! Test support: fake servers that speak the real wire formats, and a harness that starts the
//! real daemon core against them.
#![allow(dead_code)]

pub mod db;
pub mod fake_discord;
pub mod fake_llm;
pub mod fake_telegram;
pub mod handoff;
pub mod harness;
pub mod telegram;
