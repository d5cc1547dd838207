//! The promise harness: real `herald` processes, a load of chat messages that survives their
//! deaths, and a census of the store that says whether the promise held — every inbound
//! message answered exactly once, no reply row twice, no two turns of one lane at once.
//!
//! Shared by `examples/crash_loop.rs`, `benches/load.rs` and the crash, replica and fault tests
//! in `tests/it/`. It must not reach into the daemon's memory: it only sees
//! what a client, a platform and the store see.
//!
//! Platforms plug in through [`load::Channel`]: the web chat API ([`load::WebChannel`]),
//! Telegram ([`telegram::TelegramChannel`]: updates pushed into the fake Bot API server,
//! answers read from its recorded `sendMessage` calls), Discord ([`discord::DiscordChannel`]:
//! MESSAGE_CREATEs on the fake gateway, answers read from its recorded channel messages) and
//! Slack ([`slack::SlackChannel`]: Socket Mode envelopes from the fake Slack, answers read from
//! its recorded `chat.postMessage` calls), Matrix ([`matrix::MatrixChannel`]: messages a real
//! client sends on a real Synapse, answers read from what that client sees) and email
//! ([`email::EmailChannel`]: mails APPENDed to a real Dovecot, answers read from the test SMTP
//! server); the census groups by platform.

pub mod attempt;
pub mod census;
pub mod crash;
pub mod daemon;
pub mod discord;
pub mod email;
pub mod load;
pub mod matrix;
pub mod receipts;
pub mod signal;
pub mod slack;
pub mod stamps;
pub mod telegram;
pub mod whatsapp;

/// Installs the TLS provider reqwest needs (tests and the example start no other way).
pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Milliseconds since `t`, as a float for reports.
pub fn ms_since(t: std::time::Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}
