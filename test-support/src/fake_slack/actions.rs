//! What people do besides writing: pressing a button of the bot's message (`block_actions`,
//! an `interactive` envelope) and typing a slash command (`slash_commands`). Each carries a
//! `response_url` on the fake whose posts are recorded.
//!
//! Must not: redeliver these (Slack shows the person an error instead), see `envelopes.rs`.

use super::envelopes::{send, EnvKind};
use super::payloads::{self, Click, Command};
use super::records::buttons_of;
use super::FakeSlack;

impl FakeSlack {
    /// `user` presses the button `action_id` (carrying `value`) of message `message_ts` in
    /// `channel`. Returns the envelope id (the delivery id in Events API mode).
    pub fn click(
        &self,
        channel: &str,
        message_ts: &str,
        user: &str,
        action_id: &str,
        value: &str,
    ) -> String {
        let shared = &self.shared;
        let cfg = &shared.cfg;
        let mut st = shared.lock();
        st.ensure_user(user);
        let Some(msg) = st.find_msg(channel, message_ts).cloned() else {
            panic!("fake slack: no message {message_ts} in {channel} to click");
        };
        let button = buttons_of(msg.blocks.as_ref())
            .into_iter()
            .find(|b| b.action_id == action_id);
        let (block_id, text) = match button {
            Some(b) => (b.block_id, b.text),
            None => ("actions".to_string(), action_id.to_string()),
        };
        let message = st.render(channel, &msg, false, &cfg.team_id);
        let action_ts = st.next_ts();
        let n = st.new_id("");
        let user_name = st.user_name(user);
        let channel_name = st.channels[channel].name.clone();
        let payload = payloads::block_actions(
            cfg,
            Click {
                user,
                user_name: &user_name,
                channel,
                channel_name: &channel_name,
                message,
                action_id,
                block_id: &block_id,
                button_text: &text,
                value,
                action_ts: &action_ts,
                trigger_id: &format!("{n}.{}", action_ts.replace('.', "")),
                response_url: &format!("{}/_fake/respond/actions/{n}", shared.base),
            },
        );
        drop(st);
        send(shared, EnvKind::Interactive, payload, None)
    }

    /// `user` types `command text` (e.g. `/herald`, `usage`) in `channel`. Returns the
    /// envelope id (the delivery id in Events API mode).
    pub fn slash(&self, command: &str, text: &str, user: &str, channel: &str) -> String {
        let shared = &self.shared;
        let mut st = shared.lock();
        st.ensure_user(user);
        let channel_name = st.ensure_channel(channel, None).name.clone();
        let n = st.new_id("");
        let user_name = st.user_name(user);
        let payload = payloads::slash_command(
            &shared.cfg,
            Command {
                command,
                text,
                user,
                user_name: &user_name,
                channel,
                channel_name: &channel_name,
                response_url: &format!("{}/_fake/respond/commands/{n}", shared.base),
                trigger_id: &format!("{n}.{}", chrono::Utc::now().timestamp_micros()),
            },
        );
        drop(st);
        send(shared, EnvKind::SlashCommands, payload, None)
    }
}
