//! How Signal's addresses become Herald's chat ids and back, so that a lane key stays clean
//! (`[A-Za-z0-9._:-]`, `domain::LaneKey`) and readable: a direct chat is the person's number
//! without its `+` (`signal:4915123456789`) or their account uuid; a group is `group:` and its
//! id in URL-safe base64 without padding (`signal:group:Pmpi-EfP…`; signal-cli names groups
//! in standard base64, whose `+`, `/` and `=` a lane key cannot hold). Sending turns them back.
//!
//! A message on Signal is identified by its author and timestamp: its inbox key is
//! `<author>/<timestamp>`, which is also what a reply quotes.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;

/// Where a call goes: one person (`recipient`) or a group (`groupId`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum To {
    Recipient(String),
    Group(String),
}

impl To {
    /// The JSON-RPC parameter naming it.
    pub fn param(&self) -> (&'static str, &str) {
        match self {
            To::Recipient(r) => ("recipient", r),
            To::Group(g) => ("groupId", g),
        }
    }
}

/// The chat id of a direct chat with `address` (a number or a uuid).
pub fn dm_chat(address: &str) -> String {
    match address.strip_prefix('+') {
        Some(digits) => digits.to_string(),
        None => address.to_ascii_lowercase(),
    }
}

/// The chat id of the group signal-cli calls `group_id`.
pub fn group_chat(group_id: &str) -> String {
    let url_safe = STANDARD
        .decode(group_id)
        .map(|bytes| URL_SAFE_NO_PAD.encode(bytes))
        .unwrap_or_else(|_| group_id.to_string());
    format!("group:{url_safe}")
}

/// Where a chat id sends to.
pub fn to(chat_id: &str) -> To {
    if let Some(g) = chat_id.strip_prefix("group:") {
        let std = URL_SAFE_NO_PAD
            .decode(g)
            .map(|bytes| STANDARD.encode(bytes))
            .unwrap_or_else(|_| g.to_string());
        return To::Group(std);
    }
    if !chat_id.is_empty() && chat_id.bytes().all(|b| b.is_ascii_digit()) {
        return To::Recipient(format!("+{chat_id}"));
    }
    To::Recipient(chat_id.to_string())
}

/// The inbox key of a message: its author (uuid or number) and timestamp.
pub fn message_key(author: &str, timestamp: u64) -> String {
    format!("{author}/{timestamp}")
}

/// The author and timestamp of an inbox key, for a quote.
pub fn parse_message_key(key: &str) -> Option<(&str, u64)> {
    let (author, ts) = key.rsplit_once('/')?;
    Some((author, ts.parse().ok()?)).filter(|(a, _)| !a.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chats_round_trip_and_make_clean_lane_keys() {
        let group = "Pmpi+EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI=";
        let chat = group_chat(group);
        assert_eq!(chat, "group:Pmpi-EfPWmsxiomLe9Nx2XF9HOE483p6iKiFj65iMwI");
        assert_eq!(to(&chat), To::Group(group.into()));
        let lane = crate::domain::LaneKey::from_parts("signal", &chat, None);
        assert_eq!(
            lane.as_str(),
            format!("signal:{chat}"),
            "kept byte for byte"
        );

        assert_eq!(dm_chat("+4915123456789"), "4915123456789");
        assert_eq!(to("4915123456789"), To::Recipient("+4915123456789".into()));
        let uuid = "5E1A0000-0000-4000-8000-000000000001";
        assert_eq!(to(&dm_chat(uuid)), To::Recipient(uuid.to_ascii_lowercase()));
    }

    #[test]
    fn message_keys() {
        let key = message_key("5e1a0000-0000-4000-8000-000000000001", 1700000000123);
        assert_eq!(
            parse_message_key(&key),
            Some(("5e1a0000-0000-4000-8000-000000000001", 1700000000123))
        );
        assert_eq!(parse_message_key("+4915/12"), Some(("+4915", 12)));
        assert_eq!(parse_message_key("/12"), None);
        assert_eq!(parse_message_key("x/y"), None);
    }
}
