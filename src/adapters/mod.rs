//! Platform adapters: the only place platform crates (teloxide, serenity) appear. Each turns
//! platform updates into `MessageEvent`s and registers an `Outbound` for its replies.

pub mod discord;
pub mod split;
pub mod telegram;
pub mod web;
