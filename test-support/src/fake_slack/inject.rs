//! What people and other bots do in the fake workspace: direct messages, channel and thread
//! messages, mentions, edits, deletions, file shares, other bots' posts. Each is stored in its
//! channel (history shows it) and delivered as the events Slack would send: a mention in a
//! channel is both a `message` and an `app_mention` event, as it is for an app subscribed to
//! both.
//!
//! Must not: deliver an event the app is not subscribed to (see `set_subscribed`).

use std::sync::Arc;

use serde_json::Value;

use super::envelopes::send_event;
use super::payloads::{app_mention, in_channel, message_changed, message_deleted};
use super::state::{Kind, Msg};
use super::{FakeSlack, Shared};

/// A file a person shared: the message, the file and where the bot fetches it.
#[derive(Clone, Debug)]
pub struct SharedFile {
    pub ts: String,
    pub file_id: String,
    pub url_private: String,
}

/// Stores a person's message and delivers its events; returns its `ts`.
pub(crate) fn user_message(
    shared: &Arc<Shared>,
    channel: &str,
    user: &str,
    text: &str,
    thread_ts: Option<&str>,
    files: Vec<Value>,
) -> String {
    let cfg = &shared.cfg;
    let mut st = shared.lock();
    st.ensure_user(user);
    let kind = st.ensure_channel(channel, None).kind;
    let ts = st.next_ts();
    let msg = Msg {
        ts: ts.clone(),
        thread_ts: thread_ts.map(str::to_string),
        user: Some(user.to_string()),
        subtype: (!files.is_empty()).then(|| "file_share".to_string()),
        text: text.to_string(),
        files,
        client_msg_id: Some(uuid::Uuid::new_v4().to_string()),
        ..Msg::default()
    };
    st.ensure_channel(channel, None).messages.push(msg.clone());
    let rendered = st.render(channel, &msg, false, &cfg.team_id);
    let mut events = Vec::new();
    if st.subscribed(kind.subscription()) {
        events.push(in_channel(rendered.clone(), channel, kind, &ts));
    }
    let names_bot = text.contains(&format!("<@{}>", cfg.bot_user_id));
    if kind != Kind::Im && names_bot && st.subscribed("app_mention") {
        events.push(app_mention(&rendered, channel));
    }
    drop(st);
    for e in events {
        send_event(shared, e);
    }
    ts
}

impl FakeSlack {
    /// `user` writes `text` to the bot in their direct message; returns the message `ts`.
    pub fn dm(&self, user: &str, text: &str) -> String {
        let channel = self.dm_channel(user);
        user_message(&self.shared, &channel, user, text, None, Vec::new())
    }

    /// `user` writes in `channel` (in the thread of `thread_ts` when given). Text naming the
    /// bot (`<@UBOT0001>`) also makes an `app_mention`. Returns the message `ts`.
    pub fn channel_message(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
    ) -> String {
        user_message(&self.shared, channel, user, text, thread_ts, Vec::new())
    }

    /// `user` writes `<@BOT> text` at the top of `channel`; returns the message `ts`.
    pub fn mention(&self, channel: &str, user: &str, text: &str) -> String {
        let text = format!("<@{}> {text}", self.shared.cfg.bot_user_id);
        self.channel_message(channel, user, &text, None)
    }

    /// `user` writes `<@BOT> text` in the thread of `thread_ts`.
    pub fn mention_in_thread(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: &str,
    ) -> String {
        let text = format!("<@{}> {text}", self.shared.cfg.bot_user_id);
        self.channel_message(channel, user, &text, Some(thread_ts))
    }

    /// The author of message `ts` changes its text (`message_changed`); returns the event ts.
    pub fn edit_message(&self, channel: &str, ts: &str, text: &str) -> String {
        let cfg = &self.shared.cfg;
        let mut st = self.shared.lock();
        let event_ts = st.next_ts();
        let Some(m) = st.find_msg_mut(channel, ts) else {
            panic!("fake slack: no message {ts} in {channel} to edit");
        };
        let before = m.clone();
        m.text = text.to_string();
        let editor = m.user.clone().unwrap_or_else(|| cfg.bot_user_id.clone());
        m.edited = Some((editor, event_ts.clone()));
        let after = m.clone();
        let kind = st.channels[channel].kind;
        let prev = st.render(channel, &before, false, &cfg.team_id);
        let now = st.render(channel, &after, false, &cfg.team_id);
        let subscribed = st.subscribed(kind.subscription());
        drop(st);
        if subscribed {
            send_event(
                &self.shared,
                message_changed(channel, kind, &event_ts, now, prev),
            );
        }
        event_ts
    }

    /// The author deletes message `ts` (`message_deleted`); returns the event ts.
    pub fn delete_message(&self, channel: &str, ts: &str) -> String {
        let cfg = &self.shared.cfg;
        let mut st = self.shared.lock();
        let event_ts = st.next_ts();
        let Some(m) = st.find_msg_mut(channel, ts) else {
            panic!("fake slack: no message {ts} in {channel} to delete");
        };
        let before = m.clone();
        m.deleted = true;
        let kind = st.channels[channel].kind;
        let prev = st.render(channel, &before, false, &cfg.team_id);
        let subscribed = st.subscribed(kind.subscription());
        drop(st);
        if subscribed {
            send_event(
                &self.shared,
                message_deleted(channel, kind, &event_ts, ts, prev),
            );
        }
        event_ts
    }

    /// Another bot (integration) posts in `channel`: subtype `bot_message` with `bot_id`.
    pub fn bot_message(&self, channel: &str, bot_id: &str, text: &str) -> String {
        let cfg = &self.shared.cfg;
        let mut st = self.shared.lock();
        let kind = st.ensure_channel(channel, None).kind;
        let ts = st.next_ts();
        let msg = Msg {
            ts: ts.clone(),
            bot_id: Some(bot_id.to_string()),
            username: Some(format!("bot-{}", bot_id.to_lowercase())),
            subtype: Some("bot_message".into()),
            text: text.to_string(),
            ..Msg::default()
        };
        st.ensure_channel(channel, None).messages.push(msg.clone());
        let event = in_channel(
            st.render(channel, &msg, false, &cfg.team_id),
            channel,
            kind,
            &ts,
        );
        let subscribed = st.subscribed(kind.subscription());
        drop(st);
        if subscribed {
            send_event(&self.shared, event);
        }
        ts
    }

    /// `user` shares a file (`name`, `mime`, `bytes`) with `text` in `channel`: a
    /// `file_share` message whose `files[0].url_private` serves the bytes to the bot token.
    pub fn file_message(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        name: &str,
        mime: &str,
        bytes: &[u8],
    ) -> SharedFile {
        let file = {
            let mut st = self.shared.lock();
            super::files::store_user_file(&self.shared, &mut st, user, name, mime, bytes.to_vec())
        };
        let shared = SharedFile {
            ts: String::new(),
            file_id: file["id"].as_str().unwrap_or_default().to_string(),
            url_private: file["url_private"].as_str().unwrap_or_default().to_string(),
        };
        let ts = user_message(&self.shared, channel, user, text, None, vec![file]);
        SharedFile { ts, ..shared }
    }

    /// Delivers any event JSON as it is (wrapped in an `event_callback`), stored nowhere and
    /// regardless of subscriptions; returns its event id.
    pub fn send_event(&self, event: Value) -> String {
        send_event(&self.shared, event)
    }
}
