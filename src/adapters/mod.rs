//! Platform adapters: the only place platform crates (teloxide, serenity) appear.

pub mod split;
