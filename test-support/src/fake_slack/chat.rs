//! `chat.postMessage`, `chat.update` and `chat.delete`: the bot's messages, kept in their
//! channel (so history shows them) and recorded (so tests see them), echoed back as message
//! events when Slack would.
//!
//! Must not: accept what Slack refuses (unknown channel, a channel the bot is not in, no text,
//! text over 40,000 characters, someone else's message to edit or delete).

use std::sync::Arc;

use serde_json::{json, Value};

use super::args::Args;
use super::envelopes::send_event;
use super::payloads;
use super::records::{Delete, Edit, Post};
use super::state::{Msg, State};
use super::web::{err, ok};
use super::Shared;

/// Slack's limit on a message's `text`.
pub const MAX_TEXT_CHARS: usize = 40_000;

/// The message's `blocks`, `metadata` and `text` checked the way Slack checks them.
struct Content {
    text: String,
    blocks: Option<Value>,
    metadata: Option<Value>,
}

fn content(args: &Args, text_needed: bool) -> Result<Content, &'static str> {
    let blocks = args.json("blocks").map_err(|_| "invalid_blocks_format")?;
    if blocks.as_ref().is_some_and(|b| !b.is_array()) {
        return Err("invalid_blocks_format");
    }
    let metadata = args
        .json("metadata")
        .map_err(|_| "invalid_metadata_format")?;
    if let Some(md) = &metadata {
        let payload_ok = md.get("event_payload").is_none_or(Value::is_object);
        if !md["event_type"].is_string() || !payload_ok {
            return Err("invalid_metadata_format");
        }
    }
    let text = args.str("text").unwrap_or_default();
    let attachments = args.json("attachments").ok().flatten();
    if text_needed && text.is_empty() && blocks.is_none() && attachments.is_none() {
        return Err("no_text");
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err("msg_too_long");
    }
    Ok(Content {
        text,
        blocks,
        metadata,
    })
}

/// A message event for the bot's own message, as Slack echoes it to subscribed apps.
fn echo_of(st: &State, shared: &Shared, channel: &str, m: &Msg) -> Option<Value> {
    let kind = st.channels.get(channel)?.kind;
    if !st.echo_own || !st.subscribed(kind.subscription()) {
        return None;
    }
    let rendered = st.render(channel, m, false, &shared.cfg.team_id);
    Some(payloads::in_channel(rendered, channel, kind, &m.ts))
}

pub(crate) fn post_message(shared: &Arc<Shared>, args: &Args) -> Value {
    let cfg = &shared.cfg;
    let Some(target) = args.str("channel") else {
        return err("channel_not_found");
    };
    let c = match content(args, true) {
        Ok(c) => c,
        Err(e) => return err(e),
    };
    let mut st = shared.lock();
    // A user id as the channel opens (or reuses) the direct message with that person.
    let channel = match target.chars().next() {
        Some('U' | 'W') if st.users.contains_key(&target) => st.dm_channel(&target),
        _ => target,
    };
    let Some(ch) = st.channels.get(&channel) else {
        return err("channel_not_found");
    };
    if !ch.bot_member {
        return err("not_in_channel");
    }
    // A reply's ts names its thread's parent, as Slack resolves it.
    let thread_ts = args.str("thread_ts").map(|t| {
        let parent = st.find_msg(&channel, &t).and_then(|m| m.thread_ts.clone());
        parent.unwrap_or(t)
    });
    let ts = st.next_ts();
    let reply_broadcast = args.bool("reply_broadcast").unwrap_or(false) && thread_ts.is_some();
    let msg = Msg {
        ts: ts.clone(),
        thread_ts: thread_ts.clone(),
        user: Some(cfg.bot_user_id.clone()),
        bot_id: Some(cfg.bot_id.clone()),
        app_id: Some(cfg.app_id.clone()),
        subtype: reply_broadcast.then(|| "thread_broadcast".to_string()),
        text: c.text.clone(),
        blocks: c.blocks.clone(),
        metadata: c.metadata.clone(),
        reply_broadcast,
        ..Msg::default()
    };
    st.ensure_channel(&channel, None).messages.push(msg.clone());
    let (at, at_ms) = State::stamp();
    st.rec.posts.push(Post {
        channel: channel.clone(),
        ts: ts.clone(),
        text: c.text,
        thread_ts,
        blocks: c.blocks,
        mrkdwn: args.bool("mrkdwn"),
        metadata: c.metadata,
        reply_broadcast,
        args: args.recorded(),
        at,
        at_ms,
    });
    let message = st.render(&channel, &msg, true, &cfg.team_id);
    let echo = echo_of(&st, shared, &channel, &msg);
    drop(st);
    if let Some(event) = echo {
        send_event(shared, event);
    }
    ok(json!({"channel": channel, "ts": ts, "message": message}))
}

/// The bot's own live message `ts` in `channel`, or the error Slack gives.
fn own_message<'a>(
    st: &'a mut State,
    bot_user: &str,
    channel: &str,
    ts: &str,
    not_own: &'static str,
) -> Result<&'a mut Msg, &'static str> {
    if !st.channels.contains_key(channel) {
        return Err("channel_not_found");
    }
    let m = st.find_msg_mut(channel, ts).ok_or("message_not_found")?;
    if m.user.as_deref() != Some(bot_user) {
        return Err(not_own);
    }
    Ok(m)
}

pub(crate) fn update(shared: &Arc<Shared>, args: &Args) -> Value {
    let cfg = &shared.cfg;
    let (Some(channel), Some(ts)) = (args.str("channel"), args.str("ts")) else {
        return err("message_not_found");
    };
    let c = match content(args, true) {
        Ok(c) => c,
        Err(e) => return err(e),
    };
    let mut st = shared.lock();
    let edit_ts = st.next_ts();
    let (before, after) = match own_message(
        &mut st,
        &cfg.bot_user_id,
        &channel,
        &ts,
        "cant_update_message",
    ) {
        Err(e) => return err(e),
        Ok(m) => {
            let before = m.clone();
            m.text = c.text.clone();
            if c.blocks.is_some() {
                m.blocks = c.blocks.clone();
            }
            if c.metadata.is_some() {
                m.metadata = c.metadata.clone();
            }
            m.edited = Some((cfg.bot_user_id.clone(), edit_ts.clone()));
            (before, m.clone())
        }
    };
    st.rec.edits.push(Edit {
        channel: channel.clone(),
        ts: ts.clone(),
        text: c.text.clone(),
        blocks: c.blocks,
        args: args.recorded(),
        at: std::time::Instant::now(),
    });
    let message = st.render(&channel, &after, true, &cfg.team_id);
    let echo = echo_of(&st, shared, &channel, &after).map(|_| {
        let kind = st.channels[&channel].kind;
        let prev = st.render(&channel, &before, false, &cfg.team_id);
        let now = st.render(&channel, &after, false, &cfg.team_id);
        payloads::message_changed(&channel, kind, &edit_ts, now, prev)
    });
    drop(st);
    if let Some(event) = echo {
        send_event(shared, event);
    }
    ok(json!({"channel": channel, "ts": ts, "text": c.text, "message": message}))
}

pub(crate) fn delete(shared: &Arc<Shared>, args: &Args) -> Value {
    let cfg = &shared.cfg;
    let (Some(channel), Some(ts)) = (args.str("channel"), args.str("ts")) else {
        return err("message_not_found");
    };
    let mut st = shared.lock();
    let event_ts = st.next_ts();
    let before = match own_message(
        &mut st,
        &cfg.bot_user_id,
        &channel,
        &ts,
        "cant_delete_message",
    ) {
        Err(e) => return err(e),
        Ok(m) => {
            let before = m.clone();
            m.deleted = true;
            before
        }
    };
    st.rec.deletes.push(Delete {
        channel: channel.clone(),
        ts: ts.clone(),
        at: std::time::Instant::now(),
    });
    let echo = echo_of(&st, shared, &channel, &before).map(|_| {
        let kind = st.channels[&channel].kind;
        let prev = st.render(&channel, &before, false, &cfg.team_id);
        payloads::message_deleted(&channel, kind, &event_ts, &ts, prev)
    });
    drop(st);
    if let Some(event) = echo {
        send_event(shared, event);
    }
    ok(json!({"channel": channel, "ts": ts}))
}
