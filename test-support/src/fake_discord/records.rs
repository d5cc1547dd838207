//! What the bot did, read back by tests, and bounded waits on it.
//!
//! Everything here is a read of the fake's records; nothing may change state, so a test can
//! poll as often as it likes without disturbing the conversation it observes.

use std::time::Duration;

use super::{FakeDiscord, Followup, InteractionCallback, RegisteredCommand, SentMessage};

impl FakeDiscord {
    pub fn sent_messages(&self) -> Vec<SentMessage> {
        self.shared.lock().sent.clone()
    }

    /// Every channel message the bot sent, with the instant the fake recorded it.
    pub fn sent_with_times(&self) -> Vec<(SentMessage, std::time::Instant)> {
        let inner = self.shared.lock();
        inner
            .sent
            .iter()
            .cloned()
            .zip(inner.sent_at.iter().copied())
            .collect()
    }

    /// Every accepted message edit, in order.
    pub fn edits(&self) -> Vec<super::EditedMessage> {
        self.shared.lock().edits.clone()
    }

    /// What a person sees in `channel_id` now: the bot's messages not deleted, each with its
    /// latest content, in the order they were sent.
    pub fn channel_view(&self, channel_id: u64) -> Vec<SentMessage> {
        let inner = self.shared.lock();
        inner
            .sent
            .iter()
            .filter(|m| m.channel_id == channel_id && !inner.deleted.contains(&m.message_id))
            .map(|m| {
                let mut m = m.clone();
                if let Some(e) = inner
                    .edits
                    .iter()
                    .rev()
                    .find(|e| e.message_id == m.message_id)
                {
                    m.content = e.content.clone();
                }
                m
            })
            .collect()
    }

    pub fn interaction_callbacks(&self) -> Vec<InteractionCallback> {
        self.shared.lock().callbacks.clone()
    }

    pub fn followups(&self) -> Vec<Followup> {
        self.shared.lock().followups.clone()
    }

    pub fn registered_commands(&self) -> Vec<RegisteredCommand> {
        self.shared.lock().commands.clone()
    }

    pub fn typing_count(&self, channel_id: u64) -> usize {
        self.shared
            .lock()
            .typing
            .get(&channel_id)
            .copied()
            .unwrap_or(0)
    }

    pub fn identify_count(&self) -> usize {
        self.shared.lock().identify_count
    }

    pub fn resume_count(&self) -> usize {
        self.shared.lock().resume_count
    }

    /// `METHOD /path` (after `/api/v10`) of every authorized REST request, faulted ones included.
    pub fn requests(&self) -> Vec<String> {
        self.shared.lock().requests.clone()
    }

    /// `METHOD /path` of every request no route matched (also logged to stderr).
    pub fn unknown_routes(&self) -> Vec<String> {
        self.shared.lock().unknown_routes.clone()
    }

    /// True while a socket holds an identified or resumed session (of any shard).
    pub fn connected(&self) -> bool {
        !self.connected_shards().is_empty()
    }

    /// Shards whose session has a live socket, ascending.
    pub fn connected_shards(&self) -> Vec<u64> {
        let inner = self.shared.lock();
        inner
            .conns
            .keys()
            .filter(|s| inner.sessions.contains_key(s))
            .copied()
            .collect()
    }

    /// The shard count of the latest IDENTIFY.
    pub fn shard_total(&self) -> u64 {
        self.shared.lock().shard_total
    }

    pub fn identify_count_for(&self, shard: u64) -> usize {
        let inner = self.shared.lock();
        inner.identifies_by_shard.get(&shard).copied().unwrap_or(0)
    }

    /// IDENTIFYs for a shard whose socket was still live: two clients connected as one shard.
    pub fn shard_takeovers(&self) -> usize {
        self.shared.lock().shard_takeovers
    }

    /// Polls `probe` until it yields a value; panics with `what` after `timeout`, so a broken
    /// test fails instead of hanging.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut(&FakeDiscord) -> Option<T>,
    ) -> T {
        let what = format!("fake discord: {what}");
        crate::harness::wait_for(&what, timeout, async || probe(self)).await
    }

    /// Waits until at least `n` messages were sent; returns all sent so far.
    pub async fn wait_for_sent(&self, n: usize, timeout: Duration) -> Vec<SentMessage> {
        self.wait_for(&format!("{n} sent message(s)"), timeout, |f| {
            let sent = f.sent_messages();
            (sent.len() >= n).then_some(sent)
        })
        .await
    }

    /// Waits until a client is identified (READY sent) and connected.
    pub async fn wait_ready(&self, timeout: Duration) {
        self.wait_for("a READY gateway session", timeout, |f| {
            f.connected().then_some(())
        })
        .await
    }
}
