//! Button presses and the `/herald` slash command → what the core gets: a `Press` for
//! `Approvals`, or a command event. Read from the payload's JSON directly (four fields each):
//! a payload missing a field Herald does not use (`team`, `api_app_id`) must not lose a click.
//!
//! Must not: do I/O.

use serde_json::Value;

use super::inbound::Decision;
use super::SLACK;
use crate::delivery::parse_approval_button;
use crate::domain::{ChatType, MessageEvent, MessageKind, Origin};
use crate::lanes::Press;

/// A block_actions payload: our approval buttons only.
pub fn decide_interaction(payload: &Value) -> Decision {
    if payload.get("type").and_then(Value::as_str) != Some("block_actions") {
        return Decision::Ignore("interaction that is not a button press");
    }
    let value = payload
        .pointer("/actions/0/value")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some((id, approve)) = parse_approval_button(value) else {
        return Decision::Ignore("button that is not an approval button");
    };
    let user = payload.pointer("/user/id").and_then(Value::as_str);
    let channel = payload
        .pointer("/channel/id")
        .or_else(|| payload.pointer("/container/channel_id"))
        .and_then(Value::as_str);
    let (Some(user), Some(channel)) = (user, channel) else {
        return Decision::Ignore("button press without its user or channel");
    };
    Decision::Press(Press {
        approval_id: id.to_string(),
        approve,
        platform: SLACK,
        chat_id: channel.to_string(),
        sender_id: user.to_string(),
        sender_roles: Vec::new(),
    })
}

/// The `/herald` slash command: `help`, `new`, `usage`, `handoff`, `agent [NAME]` become the
/// shared commands (`/help`, `/new`, `/usage`, `/wrapup`, `/agent [NAME]`); any other text is a message to the agent. The lane
/// is the channel's own (a DM's lane; in a channel, its top level).
pub fn decide_command(payload: &Value) -> Decision {
    let field = |k: &str| payload.get(k).and_then(Value::as_str);
    let (Some(channel), Some(user), Some(trigger)) =
        (field("channel_id"), field("user_id"), field("trigger_id"))
    else {
        return Decision::Ignore("slash command without its channel, user or trigger");
    };
    let args = field("text").unwrap_or_default().trim();
    let (text, kind) = match args.to_ascii_lowercase().as_str() {
        "" | "help" => ("/help".to_string(), MessageKind::Command),
        "new" => ("/new".to_string(), MessageKind::Command),
        "usage" => ("/usage".to_string(), MessageKind::Command),
        "handoff" | "wrapup" => ("/wrapup".to_string(), MessageKind::Command),
        a if a.split_whitespace().next() == Some("agent") => {
            (format!("/{args}"), MessageKind::Command)
        }
        _ => (args.to_string(), MessageKind::Text),
    };
    let mut ev = MessageEvent::text(SLACK, channel, user, &text);
    ev.chat_type = if channel.starts_with('D') {
        ChatType::Dm
    } else {
        ChatType::Channel
    };
    ev.sender_name = field("user_name").unwrap_or(user).to_string();
    ev.platform_message_id = format!("command/{trigger}");
    ev.origin = Origin::person(kind);
    Decision::Ingest(Box::new(ev))
}
