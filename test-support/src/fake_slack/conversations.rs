//! Reading the workspace: `conversations.history` (top-level messages, newest first),
//! `conversations.replies` (a thread, its parent first, then its replies oldest first, as
//! Slack orders them), `conversations.info` and `users.info`.
//!
//! Must not: show a message's `metadata` unless `include_all_metadata` asked for it; the
//! adapter's look-up of its own message after a crash depends on asking.

use std::sync::Arc;

use serde_json::{json, Value};

use super::args::Args;
use super::payloads::{channel_json, user_json};
use super::state::Msg;
use super::web::{err, ok};
use super::Shared;

/// A `ts` as (seconds, microseconds), so `"1700000000.5"` and `"1700000000.500000"` compare
/// equal and no float rounding creeps in.
pub(crate) fn ts_key(ts: &str) -> (u64, u64) {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, ""));
    let mut digits: String = frac.chars().take(6).collect();
    while digits.len() < 6 {
        digits.push('0');
    }
    (secs.parse().unwrap_or(0), digits.parse().unwrap_or(0))
}

/// `oldest` / `latest` / `inclusive` of a read.
struct Window {
    oldest: Option<(u64, u64)>,
    latest: Option<(u64, u64)>,
    inclusive: bool,
}

impl Window {
    fn of(args: &Args) -> Window {
        Window {
            oldest: args.str("oldest").map(|t| ts_key(&t)),
            latest: args.str("latest").map(|t| ts_key(&t)),
            inclusive: args.bool("inclusive").unwrap_or(false),
        }
    }

    fn holds(&self, ts: &str) -> bool {
        let k = ts_key(ts);
        let after = self
            .oldest
            .is_none_or(|o| if self.inclusive { k >= o } else { k > o });
        let before = self
            .latest
            .is_none_or(|l| if self.inclusive { k <= l } else { k < l });
        after && before
    }
}

fn cursor_ts(args: &Args) -> Option<(u64, u64)> {
    args.str("cursor")
        .and_then(|c| c.strip_prefix("next_ts:").map(ts_key))
}

fn limit(args: &Args, default: usize, max: usize) -> usize {
    let asked = args.str("limit").and_then(|l| l.parse::<usize>().ok());
    asked.filter(|&l| l > 0).unwrap_or(default).min(max)
}

/// The page of `items` (already in answer order) and its `has_more` / `next_cursor`.
fn page(rendered: Vec<(String, Value)>, limit: usize) -> Value {
    let has_more = rendered.len() > limit;
    let next = if has_more {
        format!("next_ts:{}", rendered[limit - 1].0)
    } else {
        String::new()
    };
    let messages: Vec<Value> = rendered.into_iter().take(limit).map(|(_, v)| v).collect();
    json!({
        "messages": messages,
        "has_more": has_more,
        "response_metadata": {"next_cursor": next},
    })
}

pub(crate) fn history(shared: &Arc<Shared>, args: &Args) -> Value {
    let Some(channel) = args.str("channel") else {
        return err("channel_not_found");
    };
    let st = shared.lock();
    let Some(ch) = st.channels.get(&channel) else {
        return err("channel_not_found");
    };
    if !ch.bot_member {
        return err("not_in_channel");
    }
    let with_md = args.bool("include_all_metadata").unwrap_or(false);
    let window = Window::of(args);
    let cursor = cursor_ts(args);
    let top_level = |m: &&Msg| {
        m.thread_ts.is_none() || m.thread_ts.as_deref() == Some(m.ts.as_str()) || m.reply_broadcast
    };
    let mut msgs: Vec<&Msg> = ch
        .messages
        .iter()
        .filter(|m| !m.deleted)
        .filter(top_level)
        .filter(|m| window.holds(&m.ts))
        .filter(|m| cursor.is_none_or(|c| ts_key(&m.ts) < c))
        .collect();
    msgs.sort_by_key(|m| std::cmp::Reverse(ts_key(&m.ts)));
    let rendered = msgs
        .into_iter()
        .map(|m| {
            (
                m.ts.clone(),
                st.render(&channel, m, with_md, &shared.cfg.team_id),
            )
        })
        .collect();
    let mut body = page(rendered, limit(args, 100, 999));
    body["pin_count"] = json!(0);
    body["channel_actions_ts"] = Value::Null;
    body["channel_actions_count"] = json!(0);
    ok(body)
}

pub(crate) fn replies(shared: &Arc<Shared>, args: &Args) -> Value {
    let Some(channel) = args.str("channel") else {
        return err("channel_not_found");
    };
    let Some(ts) = args.str("ts") else {
        return err("thread_not_found");
    };
    let st = shared.lock();
    let Some(ch) = st.channels.get(&channel) else {
        return err("channel_not_found");
    };
    if !ch.bot_member {
        return err("not_in_channel");
    }
    let Some(asked) = st.find_msg(&channel, &ts) else {
        return err("thread_not_found");
    };
    let root = asked.thread_ts.clone().unwrap_or(ts);
    let with_md = args.bool("include_all_metadata").unwrap_or(false);
    let window = Window::of(args);
    let cursor = cursor_ts(args);
    let mut replies: Vec<&Msg> = ch
        .messages
        .iter()
        .filter(|m| !m.deleted && m.ts != root)
        .filter(|m| m.thread_ts.as_deref() == Some(root.as_str()))
        .filter(|m| window.holds(&m.ts))
        .filter(|m| cursor.is_none_or(|c| ts_key(&m.ts) > c))
        .collect();
    replies.sort_by_key(|m| ts_key(&m.ts));
    let parent = st.find_msg(&channel, &root).filter(|_| cursor.is_none());
    let rendered = parent
        .into_iter()
        .chain(replies)
        .map(|m| {
            (
                m.ts.clone(),
                st.render(&channel, m, with_md, &shared.cfg.team_id),
            )
        })
        .collect();
    ok(page(rendered, limit(args, 1000, 1000)))
}

pub(crate) fn info(shared: &Arc<Shared>, args: &Args) -> Value {
    let st = shared.lock();
    match args.str("channel").and_then(|c| st.channels.get(&c)) {
        Some(c) => ok(json!({"channel": channel_json(c)})),
        None => err("channel_not_found"),
    }
}

pub(crate) fn user_info(shared: &Arc<Shared>, args: &Args) -> Value {
    let st = shared.lock();
    let Some(id) = args.str("user") else {
        return err("user_not_found");
    };
    match st.users.get(&id) {
        Some(u) => ok(json!({"user": user_json(&shared.cfg, &id, u)})),
        None => err("user_not_found"),
    }
}
