//! The event → `MessageEvent` translation table: one Slack event per row, what the core gets.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::inbound::{decide_event, BotIdentity, Decision, Rules};
use super::interactions::{decide_command, decide_interaction};
use crate::domain::{ChatType, MessageKind};

fn me() -> BotIdentity {
    BotIdentity {
        user_id: "UBOT0001".into(),
        bot_id: Some("BBOT0001".into()),
    }
}

fn decide(event: Value, free: &[&str], require_mention: bool) -> Decision {
    let me = me();
    let free: HashSet<String> = free.iter().map(|s| s.to_string()).collect();
    let rules = Rules {
        me: &me,
        require_mention,
        free_response_channels: &free,
    };
    decide_event(&event, &rules).expect("the event reads")
}

/// (lane, kind, text, platform id) of an ingested event, or the ignore reason.
fn summary(d: &Decision) -> String {
    match d {
        Decision::Ingest(event) => format!(
            "{} {:?} {:?} {} files={}",
            event.lane().as_str(),
            event.kind().unwrap(),
            event.text,
            event.platform_message_id,
            event.attachments.len()
        ),
        Decision::Press(p) => format!("press {} {} by {}", p.approval_id, p.approve, p.sender_id),
        Decision::Ignore(why) => format!("ignore: {why}"),
    }
}

fn msg(channel: &str, channel_type: &str, user: &str, text: &str, ts: &str) -> Value {
    json!({"type": "message", "channel": channel, "channel_type": channel_type,
           "user": user, "text": text, "ts": ts, "event_ts": ts})
}

#[test]
fn translation_table() {
    let thread_reply = {
        let mut m = msg(
            "C1",
            "channel",
            "U1",
            "<@UBOT0001> and then?",
            "1700000002.000200",
        );
        m["thread_ts"] = json!("1700000001.000100");
        m
    };
    let bot_message = json!({"type": "message", "subtype": "bot_message", "channel": "C1",
        "channel_type": "channel", "bot_id": "BOTHER", "text": "<@UBOT0001> hi", "ts": "1.1"});
    let own_message = {
        let mut m = msg("D1", "im", "UBOT0001", "my own reply", "1.2");
        m["bot_id"] = json!("BBOT0001");
        m
    };
    let edit = json!({"type": "message", "subtype": "message_changed", "channel": "D1",
        "channel_type": "im", "ts": "1700000005.000500", "hidden": true,
        "message": {"type": "message", "user": "U1", "text": "fixed typo", "ts": "1700000004.000400",
                    "edited": {"user": "U1", "ts": "1700000005.000500"}},
        "previous_message": {"type": "message", "user": "U1", "text": "fixd typo", "ts": "1700000004.000400"}});
    let delete = json!({"type": "message", "subtype": "message_deleted", "channel": "C1",
        "channel_type": "channel", "ts": "1700000007.000700", "hidden": true,
        "deleted_ts": "1700000006.000600",
        "previous_message": {"type": "message", "user": "U1", "text": "<@UBOT0001> oops",
                             "ts": "1700000006.000600", "thread_ts": "1700000006.000600"}});
    let file = json!({"type": "message", "subtype": "file_share", "channel": "D1", "channel_type": "im",
        "user": "U1", "text": "", "ts": "1700000008.000800",
        "files": [{"id": "F1", "name": "cat.png", "mimetype": "image/png", "size": 1234,
                   "url_private": "https://files.slack.com/files-pri/T1-F1/cat.png"}]});
    let join = json!({"type": "message", "subtype": "channel_join", "channel": "C1",
        "channel_type": "channel", "user": "U1", "text": "<@U1> has joined", "ts": "1.3"});
    let cases: Vec<(Value, &[&str], bool, &str)> = vec![
        (
            msg("D1", "im", "U1", "hello &amp; welcome", "1700000000.000100"),
            &[],
            true,
            r#"slack:D1 Text "hello & welcome" D1/1700000000.000100 files=0"#,
        ),
        (
            msg(
                "C1",
                "channel",
                "U1",
                "<@UBOT0001> what is up?",
                "1700000001.000100",
            ),
            &[],
            true,
            r#"slack:C1:1700000001.000100 Text "what is up?" C1/1700000001.000100 files=0"#,
        ),
        (
            json!({"type": "app_mention", "channel": "C1", "user": "U1",
                   "text": "<@UBOT0001> what is up?", "ts": "1700000001.000100", "event_ts": "1700000001.000100"}),
            &[],
            true,
            r#"slack:C1:1700000001.000100 Text "what is up?" C1/1700000001.000100 files=0"#,
        ),
        (
            thread_reply,
            &[],
            true,
            r#"slack:C1:1700000001.000100 Text "and then?" C1/1700000002.000200 files=0"#,
        ),
        (
            msg("C1", "channel", "U1", "just chatting", "1.4"),
            &[],
            true,
            "ignore: channel message not addressed to the bot",
        ),
        (
            msg("C2", "channel", "U1", "just chatting", "1.5"),
            &["C2"],
            true,
            r#"slack:C2:1.5 Text "just chatting" C2/1.5 files=0"#,
        ),
        (
            msg("C1", "channel", "U1", "no mention needed", "1.6"),
            &[],
            false,
            r#"slack:C1:1.6 Text "no mention needed" C1/1.6 files=0"#,
        ),
        (bot_message, &[], true, "ignore: message from a bot"),
        (own_message, &[], true, "ignore: message from a bot"),
        (
            edit,
            &[],
            true,
            r#"slack:D1 Edited "fixed typo" D1/1700000005.000500 files=0"#,
        ),
        (
            delete,
            &[],
            true,
            r#"slack:C1:1700000006.000600 Service "(deleted a message)" C1/1700000007.000700 files=0"#,
        ),
        (
            file,
            &[],
            true,
            r#"slack:D1 Media "" D1/1700000008.000800 files=1"#,
        ),
        (
            msg("D1", "im", "U1", "/new", "1.7"),
            &[],
            true,
            r#"slack:D1 Command "/new" D1/1.7 files=0"#,
        ),
        (join, &[], true, "ignore: housekeeping subtype"),
        (
            json!({"type": "reaction_added", "user": "U1", "reaction": "+1", "event_ts": "1.8",
                   "item": {"type": "message", "channel": "C1", "ts": "1.1"}}),
            &[],
            true,
            "ignore: event type not handled",
        ),
    ];
    for (event, free, require_mention, want) in cases {
        let got = summary(&decide(event.clone(), free, require_mention));
        assert_eq!(got, want, "event {event}");
    }
}

#[test]
fn dm_and_thread_shapes() {
    let Decision::Ingest(event) =
        decide(msg("D1", "im", "U1", "hi", "1700000000.000100"), &[], true)
    else {
        panic!("ingested")
    };
    assert_eq!(event.chat_type, ChatType::Dm);
    assert_eq!(event.thread_id, None);
    assert_eq!(event.sender_id, "U1");
    assert_eq!(event.timestamp.timestamp(), 1_700_000_000);
    assert!(event.can_start_turn());
    let Decision::Ingest(event) = decide(
        msg("C1", "channel", "U1", "<@UBOT0001>", "1700000001.000100"),
        &[],
        true,
    ) else {
        panic!("ingested")
    };
    assert_eq!(event.chat_type, ChatType::Thread);
    assert_eq!(event.thread_id.as_deref(), Some("1700000001.000100"));
    assert_eq!(
        event.text, "<@UBOT0001>",
        "a bare mention still reads as a greeting"
    );
}

#[test]
fn edits_and_deletions_never_start_a_turn() {
    for kind in [MessageKind::Edited, MessageKind::Service] {
        let mut ev = crate::domain::MessageEvent::text(super::SLACK, "D1", "U1", "x");
        ev.origin = crate::domain::Origin::person(kind);
        assert!(!ev.can_start_turn());
    }
}

#[test]
fn malformed_event_is_an_error_not_a_panic() {
    let me = me();
    let free = HashSet::new();
    let rules = Rules {
        me: &me,
        require_mention: true,
        free_response_channels: &free,
    };
    // A message without its ts cannot be keyed: it does not read.
    let bad = json!({"type": "message", "channel": "D1", "user": "U1", "text": "hi"});
    assert!(decide_event(&bad, &rules).is_err());
}

#[test]
fn button_presses() {
    let press = |value: &str, user: &str| {
        json!({"type": "block_actions", "user": {"id": user}, "channel": {"id": "C1"},
               "container": {"type": "message", "message_ts": "1.1", "channel_id": "C1"},
               "actions": [{"type": "button", "action_id": "herald_approval_yes", "value": value}]})
    };
    assert_eq!(
        summary(&decide_interaction(&press("ap:abc:y", "U1"))),
        "press abc true by U1"
    );
    assert_eq!(
        summary(&decide_interaction(&press("ap:abc:n", "U2"))),
        "press abc false by U2"
    );
    assert_eq!(
        summary(&decide_interaction(&press("something else", "U1"))),
        "ignore: button that is not an approval button"
    );
    assert_eq!(
        summary(&decide_interaction(&json!({"type": "view_submission"}))),
        "ignore: interaction that is not a button press"
    );
}

#[test]
fn slash_command_table() {
    let slash = |text: &str, channel: &str| {
        json!({"command": "/herald", "text": text, "user_id": "U1", "user_name": "ada",
               "channel_id": channel, "trigger_id": "T.1", "response_url": "https://hooks/x"})
    };
    let cases = [
        ("", "D1", r#"slack:D1 Command "/help" command/T.1 files=0"#),
        (
            "help",
            "D1",
            r#"slack:D1 Command "/help" command/T.1 files=0"#,
        ),
        (
            "new",
            "D1",
            r#"slack:D1 Command "/new" command/T.1 files=0"#,
        ),
        (
            "usage",
            "C1",
            r#"slack:C1 Command "/usage" command/T.1 files=0"#,
        ),
        (
            " Handoff ",
            "D1",
            r#"slack:D1 Command "/wrapup" command/T.1 files=0"#,
        ),
        (
            "agent coder",
            "D1",
            r#"slack:D1 Command "/agent coder" command/T.1 files=0"#,
        ),
        (
            "agents are fun",
            "D1",
            r#"slack:D1 Text "agents are fun" command/T.1 files=0"#,
        ),
        (
            "what time is it",
            "D1",
            r#"slack:D1 Text "what time is it" command/T.1 files=0"#,
        ),
    ];
    for (text, channel, want) in cases {
        assert_eq!(
            summary(&decide_command(&slash(text, channel))),
            want,
            "{text:?}"
        );
    }
    assert_eq!(
        summary(&decide_command(&json!({"command": "/herald"}))),
        "ignore: slash command without its channel, user or trigger"
    );
}
