//! Fuzz-style property tests for the pure rules that take outside input: the handoff trigger,
//! the lane key, the capsule trim, the message splitter, the compaction projection and the
//! decoding of a `MessageEvent`. No input may panic them, and each keeps its invariant.
//!
//! They run on stable in every `cargo test`; the same invariants drive the cargo-fuzz targets
//! in `fuzz/` (`scripts/fuzz`). The default case count keeps CI fast; `HERALD_FUZZ_CASES`
//! raises it (`scripts/fuzz --props` runs every property with a large count for a bounded time).

use herald::adapters::split::{split_message, Measure};
use herald::agent::compaction::ProjMessage;
use herald::domain::{LaneKey, MessageEvent, Role, ToolCall, MAX_LANE_KEY_LEN};
use herald::handoff::{is_handoff_word, is_wrapup_command, trim_capsule};
use proptest::prelude::*;

// The invariant checks, shared with the cargo-fuzz targets in fuzz/.
use herald_test_support::invariants::{
    check_capsule_trim, check_event_round_trip, check_handoff_trigger, check_lane_key,
    check_projection, check_split, Verdict,
};

/// A broken invariant as a proptest failure (shrunk and reported with its input).
fn holds(verdict: Verdict) -> Result<(), TestCaseError> {
    verdict.map_err(TestCaseError::fail)
}

fn cases() -> u32 {
    std::env::var("HERALD_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Text that stresses the rules: markdown headings, fences, newlines, wide and astral chars.
fn gnarly_text(max: usize) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "[a-zA-Z0-9 .,!?]{1,12}",
        2 => Just("\n".to_string()),
        1 => Just("\n\n".to_string()),
        1 => Just("## Pointers\n".to_string()),
        1 => Just("## Next\n".to_string()),
        1 => Just("```rust\n".to_string()),
        1 => Just("```\n".to_string()),
        1 => "[é漢字😀🏳️‍🌈\u{202e}\u{0}\t ]{1,6}",
        1 => any::<String>(),
    ];
    prop::collection::vec(piece, 0..max).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn handoff_word_accepts_every_dressing_of_the_three_words(
        word in prop::sample::select(vec!["handoff", "hand off", "hand-off"]),
        upper in prop::collection::vec(any::<bool>(), 8),
        ws1 in "[ \t\n]{0,3}",
        dots1 in "[.!]{0,3}",
        dots2 in "[.!]{0,3}",
        ws2 in "[ \t\n]{0,3}",
    ) {
        let dressed: String = word
            .chars()
            .zip(upper.iter().cycle())
            .map(|(c, &u)| if u { c.to_ascii_uppercase() } else { c })
            .collect();
        let text = format!("{ws1}{dots1}{dressed}{dots2}{ws2}");
        prop_assert!(is_handoff_word(&text), "{:?}", text);
    }

    #[test]
    fn handoff_word_refuses_anything_with_more_words(
        word in prop::sample::select(vec!["handoff", "hand off", "hand-off"]),
        extra in "[a-z0-9/]{1,10}",
        before in any::<bool>(),
    ) {
        let text = if before { format!("{extra} {word}") } else { format!("{word} {extra}") };
        prop_assert!(!is_handoff_word(&text), "{:?}", text);
        let slashed = format!("/{word}");
        prop_assert!(!is_handoff_word(&slashed), "{:?}", slashed);
    }

    #[test]
    fn trigger_rules_accept_only_the_bare_words(text in any::<String>(), bot in proptest::option::of("[A-Za-z_@]{0,12}")) {
        holds(check_handoff_trigger(&text, bot.as_deref()))?;
    }

    #[test]
    fn wrapup_is_the_bare_command_or_addressed_to_this_bot(
        bot in "[A-Za-z0-9_]{1,16}",
        other in "[A-Za-z0-9_]{1,16}",
        args in "[a-z ]{1,10}",
        ws in "[ \n]{0,3}",
    ) {
        let bare = format!("{ws}/wrapup{ws}");
        let mine = format!("/WrapUp@{bot}");
        let theirs = format!("/wrapup@{other}");
        prop_assert!(is_wrapup_command(&bare, Some(&bot)), "{:?}", bare);
        prop_assert!(is_wrapup_command(&mine, Some(&bot)), "{:?}", mine);
        prop_assert!(is_wrapup_command(&theirs, None), "{:?}", theirs);
        prop_assert_eq!(
            is_wrapup_command(&theirs, Some(&bot)),
            other.eq_ignore_ascii_case(&bot)
        );
        let with_args = format!("/wrapup {}", args.trim());
        prop_assert_eq!(is_wrapup_command(&with_args, Some(&bot)), args.trim().is_empty());
    }

    #[test]
    fn lane_key_is_bounded_clean_and_keeps_short_clean_keys(raw in any::<String>()) {
        holds(check_lane_key(&raw))?;
    }

    #[test]
    fn long_lane_keys_never_collide(
        prefix in "[a-z:]{121,200}",
        a in any::<String>(),
        b in any::<String>(),
    ) {
        prop_assume!(a != b);
        let ka = LaneKey::new(&format!("{prefix}{a}"));
        let kb = LaneKey::new(&format!("{prefix}{b}"));
        prop_assert_eq!(ka.as_str().len(), MAX_LANE_KEY_LEN);
        prop_assert_ne!(ka, kb, "a plain truncation would collapse these");
    }

    #[test]
    fn capsule_trim_fits_the_cap_and_keeps_head_and_tail_in_order(
        text in gnarly_text(400),
        cap in 0usize..3000,
    ) {
        holds(check_capsule_trim(&text, cap, &trim_capsule(&text, cap)))?;
    }

    #[test]
    fn splitter_chunks_fit_and_lose_nothing_but_separators(
        text in gnarly_text(300).prop_map(|t| t.replace('`', "'")),
        limit in 16usize..600,
        utf16 in any::<bool>(),
    ) {
        let measure = if utf16 { Measure::Utf16 } else { Measure::Chars };
        // Without fences (replaced above) the content check applies to every case.
        holds(check_split(&text, limit, measure, &split_message(&text, limit, measure)))?;
    }

    #[test]
    fn splitter_with_fences_keeps_every_chunk_within_limit_and_not_blank(
        text in gnarly_text(300),
        limit in 16usize..600,
        utf16 in any::<bool>(),
    ) {
        let measure = if utf16 { Measure::Utf16 } else { Measure::Chars };
        holds(check_split(&text, limit, measure, &split_message(&text, limit, measure)))?;
    }

    #[test]
    fn message_event_decoding_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = serde_json::from_slice::<MessageEvent>(&bytes);
    }

    #[test]
    fn message_event_decoding_never_panics_and_round_trips(v in json_value()) {
        let bytes = serde_json::to_vec(&v).unwrap_or_default();
        if let Ok(ev) = serde_json::from_slice::<MessageEvent>(&bytes) {
            holds(check_event_round_trip(&ev))?;
        }
    }
}

proptest! {
    // The projection is the slowest rule under test (a debug build runs every message through
    // several scanners), so it gets a quarter of the case count.
    #![proptest_config(ProptestConfig { cases: (cases() / 4).max(16), ..config() })]

    #[test]
    fn compaction_projection_is_deterministic_and_within_budget(
        msgs in prop::collection::vec(proj_message(), 0..24),
        previous in proptest::option::of(gnarly_text(40)),
        budget in 1500usize..20_000,
    ) {
        holds(check_projection(&msgs, previous.as_deref(), budget))?;
    }
}

fn proj_message() -> impl Strategy<Value = ProjMessage> {
    let role = prop::sample::select(vec![Role::User, Role::Assistant, Role::Tool, Role::System]);
    let call = ("[a-z_]{1,10}", gnarly_text(6)).prop_map(|(name, arguments)| ToolCall {
        id: "call_1".into(),
        name,
        arguments,
    });
    (
        0i64..10_000,
        role,
        gnarly_text(30),
        prop::collection::vec(call, 0..2),
        proptest::option::of(Just("call_1".to_string())),
        proptest::option::of(
            prop::sample::select(vec!["terminal", "read_file", "write_file", "patch"])
                .prop_map(String::from),
        ),
    )
        .prop_map(
            |(id, role, content, tool_calls, tool_call_id, tool_name)| ProjMessage {
                id,
                role,
                content,
                tool_calls,
                tool_call_id,
                tool_name,
            },
        )
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map_or(serde_json::Value::Null, serde_json::Value::Number)),
        prop::sample::select(vec![
            "web",
            "telegram",
            "discord",
            "cron",
            "dm",
            "group",
            "text",
            "photo",
            "2024-01-01T00:00:00Z",
            "",
        ])
        .prop_map(serde_json::Value::from),
        any::<String>().prop_map(serde_json::Value::from),
    ];
    let keys = prop::sample::select(vec![
        "platform",
        "chat_id",
        "chat_type",
        "thread_id",
        "sender_id",
        "sender_name",
        "platform_message_id",
        "update_id",
        "text",
        "kind",
        "reply_to",
        "timestamp",
        "internal",
        "attachments",
        "from_loopback",
        "control",
        "deliver_to",
        "origin",
        "person",
        "scheduled",
        "x",
    ]);
    leaf.prop_recursive(3, 40, 12, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(keys.clone().prop_map(String::from), inner, 0..14)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}
