//! Shared test support: fake platform servers that the real client crates talk to.
#![allow(dead_code)]

pub mod fake_telegram;
