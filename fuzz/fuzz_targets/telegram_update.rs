//! Telegram update JSON → `MessageEvent`: any bytes a Bot API server (or a forged webhook
//! call) can send. Decoding and the ingest decision must not panic, an ingested event must be
//! a Telegram event on a clean lane, and it must survive the inbox's JSON round trip unchanged.
#![no_main]

use std::collections::HashSet;

use herald::adapters::telegram::inbound::{decide, BotIdentity, Decision, Rules};
use herald::domain::{MessageEvent, Platform};
use herald_fuzz::{holds, invariants::check_event_round_trip};
use libfuzzer_sys::fuzz_target;
use teloxide::types::Update;

fuzz_target!(|data: &[u8]| {
    // The inbox's own decoder sees stored bytes too.
    let _ = serde_json::from_slice::<MessageEvent>(data);
    let Ok(raw) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(update) = <Update as serde::Deserialize>::deserialize(&raw) else {
        return;
    };
    let me = BotIdentity {
        id: 4242,
        username: "herald_test_bot".into(),
    };
    let free: HashSet<String> = ["-100".to_string()].into();
    let rules = Rules {
        me: &me,
        free_response_chats: &free,
    };
    if let Decision::Ingest(ev) = decide(&update, &rules) {
        assert_eq!(ev.platform, Platform::named("telegram"));
        holds(check_event_round_trip(&ev));
    }
});
