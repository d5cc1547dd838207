//! The Slack way in for the promise runs: lane `i` is the direct message `DLANEiiii` of person
//! `ULANEiiii` with the bot on the fake Slack, each message one Socket Mode envelope, and the
//! answer whatever the fake recorded from `chat.postMessage` in that channel: the user-visible
//! truth, independent of the store the census reads.
//!
//! A message is injected once and its envelope stays pending until the daemon acknowledges it
//! (redelivered to the restarted daemon after a kill, with no retry limit: the run measures the
//! daemon, not Slack's patience); the channel never re-injects. Slack lets the adapter find its
//! own earlier post by the metadata key, so, unlike Telegram, a kill between Slack accepting a
//! post and `mark_sent` need not send it again: [`SlackReceipts`] counts every post whose key
//! was already posted as a resend, and the promise allows none.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use serde::Serialize;

use super::super::fake_slack::{FakeSlack, FakeSlackConfig};
use super::attempt::{await_reply, daemon_env, Pushed};
use super::census::Kill;
use super::load::{Answer, Channel};

/// The person of lane `index`.
pub fn lane_user(index: usize) -> String {
    format!("ULANE{index:04}")
}

/// The inbox's dedupe id of a Slack message: its channel and `ts` (a `ts` is unique only
/// within its channel; an `app_mention` and the `message` event of one message share it, as
/// does every redelivery of either).
pub fn platform_message_id(channel: &str, ts: &str) -> String {
    format!("{channel}/{ts}")
}

#[derive(Clone)]
pub struct SlackChannel {
    fake: Arc<FakeSlack>,
    /// client id → (channel, ts) of the message injected for it.
    pushed: Pushed<(String, String)>,
}

impl SlackChannel {
    /// Starts the fake Slack (Socket Mode, default tokens) for a daemon to connect to.
    pub async fn start() -> SlackChannel {
        let fake = FakeSlack::start(FakeSlackConfig::default()).await;
        fake.set_max_retries(None);
        SlackChannel {
            fake: Arc::new(fake),
            pushed: Pushed::default(),
        }
    }

    /// Settings for a daemon on this fake, in Socket Mode, answering everyone.
    pub fn daemon_env(&self) -> Vec<(String, String)> {
        let cfg = self.fake.config();
        daemon_env(vec![
            ("HERALD_SLACK__BOT_TOKEN", cfg.bot_token.clone()),
            ("HERALD_SLACK__APP_TOKEN", cfg.app_token.clone()),
            ("HERALD_SLACK__SIGNING_SECRET", cfg.signing_secret.clone()),
            ("HERALD_SLACK__API_URL", self.fake.api_url()),
            ("HERALD_SLACK__MODE", "socket".into()),
            ("HERALD_SLACK__ALLOW_ALL_USERS", "true".into()),
        ])
    }

    pub fn fake(&self) -> &FakeSlack {
        &self.fake
    }

    /// Injects the message for `client_id` unless it already was; returns (channel, ts).
    fn push_once(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> Result<(String, String), String> {
        let index: usize = lane
            .strip_prefix("slack:DLANE")
            .and_then(|i| i.parse().ok())
            .ok_or_else(|| format!("not a lane of this channel: {lane}"))?;
        let mut pushed = self.pushed.lock();
        if let Some(ids) = pushed.get(client_id) {
            return Ok(ids.clone());
        }
        let user = lane_user(index);
        let channel = self.fake.dm_channel(&user);
        let ts = self.fake.dm(&user, text);
        pushed.insert(client_id.to_string(), (channel.clone(), ts.clone()));
        Ok((channel, ts))
    }

    /// Counts what the people saw: replies per message, resends by metadata key, envelopes.
    pub fn receipts(&self, kills: &[Kill]) -> SlackReceipts {
        let posts = self.fake.posted();
        let pushed = self.pushed.lock().clone();
        // (channel, text) → the message it answers: each lane waits for one answer at a time,
        // so a lane's texts are distinct.
        let mut texts: HashMap<(String, String), (String, String)> = HashMap::new();
        for (channel, ts) in pushed.values() {
            let view = self.fake.channel_view(channel);
            if let Some((_, _, text)) = view.iter().find(|(t, _, _)| t == ts) {
                let reply = format!("reply to: {text}");
                texts.insert((channel.clone(), reply), (channel.clone(), ts.clone()));
            }
        }
        let mut r = SlackReceipts {
            messages: pushed.len(),
            posts: posts.len(),
            ..SlackReceipts::default()
        };
        let mut first_by_key: HashMap<String, i64> = HashMap::new();
        let mut replies: HashMap<(String, String), usize> = HashMap::new();
        for p in &posts {
            match p.metadata_key() {
                None => r.posts_without_key += 1,
                Some(key) => match first_by_key.get(&key) {
                    None => {
                        first_by_key.insert(key, p.at_ms);
                    }
                    Some(&first) => {
                        r.resends += 1;
                        let straddles =
                            kills.iter().any(|k| first <= k.at_ms && p.at_ms >= k.at_ms);
                        if straddles {
                            r.resends_across_a_kill += 1;
                        }
                        if r.details.len() < 20 {
                            r.details.push(format!(
                                "key {key} posted again in {} at {} (first at {first})",
                                p.channel, p.at_ms
                            ));
                        }
                    }
                },
            }
            let answered = p
                .thread_ts
                .as_ref()
                .map(|t| (p.channel.clone(), t.clone()))
                .filter(|ids| pushed.values().any(|v| v == ids))
                .or_else(|| {
                    texts
                        .get(&(p.channel.clone(), p.text.trim().to_string()))
                        .cloned()
                });
            match answered {
                Some(ids) => *replies.entry(ids).or_default() += 1,
                None => r.posts_not_replies += 1,
            }
        }
        for ids in pushed.values() {
            match replies.get(ids).copied().unwrap_or(0) {
                0 => r.unanswered += 1,
                1 => r.answered_exactly_once += 1,
                _ => r.answered_more_than_once += 1,
            }
        }
        let ours: HashSet<(String, String)> = pushed.values().cloned().collect();
        for e in self.fake.envelopes() {
            let about = e.channel.clone().zip(e.ts.clone());
            if e.event_type.as_deref() != Some("message")
                || !about.is_some_and(|a| ours.contains(&a))
            {
                continue;
            }
            r.envelopes += 1;
            r.redeliveries += e.deliveries.saturating_sub(1) as usize;
            if !e.acked {
                r.unacked += 1;
            }
        }
        r
    }
}

impl Channel for SlackChannel {
    fn platform(&self) -> &'static str {
        "slack"
    }

    fn lane(&self, _prefix: &str, index: usize) -> String {
        format!("slack:D{}", &lane_user(index)[1..])
    }

    fn platform_id(&self, client_id: &str) -> String {
        let show = |(channel, ts): &(String, String)| platform_message_id(channel, ts);
        self.pushed.platform_id(client_id, show)
    }

    fn deliver(
        &self,
        lane: &str,
        client_id: &str,
        text: &str,
    ) -> impl Future<Output = Result<Answer, String>> + Send {
        let pushed = self.push_once(lane, client_id, text);
        let fake = self.fake.clone();
        let expected = format!("reply to: {text}");
        async move {
            let (channel, ts) = pushed?;
            await_reply(format!("{channel}/{ts}"), || {
                let reply = fake.posted_in(&channel).into_iter().find(|p| {
                    p.thread_ts.as_deref() == Some(ts.as_str()) || p.text.trim() == expected
                });
                reply.map(|p| p.text)
            })
            .await
        }
    }
}

/// What the people on the fake Slack saw.
#[derive(Debug, Default, Serialize)]
pub struct SlackReceipts {
    /// Messages injected (one per client message).
    pub messages: usize,
    /// `chat.postMessage` calls the fake accepted.
    pub posts: usize,
    pub answered_exactly_once: usize,
    pub unanswered: usize,
    pub answered_more_than_once: usize,
    /// Posts carrying a metadata key an earlier post already carried: one outbox row sent twice.
    pub resends: usize,
    /// Of those, the ones whose first copy went out before a kill and which came after it.
    pub resends_across_a_kill: usize,
    /// Posts with no `metadata.event_payload.key` (the adapter could not find them again).
    pub posts_without_key: usize,
    /// Posts that answer no injected message (later chunks, stray messages).
    pub posts_not_replies: usize,
    /// Envelopes of the injected messages, their deliveries beyond the first, and those
    /// never acknowledged.
    pub envelopes: usize,
    pub redeliveries: usize,
    pub unacked: usize,
    pub details: Vec<String>,
}

impl SlackReceipts {
    /// Every message answered exactly once, no row posted twice, every envelope acknowledged.
    pub fn promise_held(&self) -> bool {
        self.unanswered == 0
            && self.answered_more_than_once == 0
            && self.resends == 0
            && self.unacked == 0
            && self.answered_exactly_once == self.messages
    }
}
