//! The pace of everything Herald sends into a chat: messages, preview messages, preview edits
//! and the outbox's final edits, per chat and across a platform, within the platform's
//! published flood limits — without ever making a person wait at a conversation's pace.
//!
//! Each chat has a token bucket (kept as a GCRA "theoretical arrival time"): it refills at the
//! platform's steady rate (Telegram: one message a second in a private chat) and holds a burst
//! on top. Only what answers a person may spend the burst: the first message of a reply to
//! their message, and the final edit that turns a preview into that answer. Everything else
//! (a long reply's later chunks, cron fan-out, files, preview edits) is bulk and leaves only at
//! the steady rate, so a 12,000-character answer still goes out one chunk a second. A platform
//! may also have overall windows across all its chats (Telegram: at most 30 messages in any
//! second, and 20 preview edits), which every message, or preview edit, counts in. Previews have their own least interval per chat on top
//! (`streaming.edit_interval_ms`).
//!
//! Reservations are taken under one lock and may lie in the future: the caller sleeps until its
//! slot, so two callers never take the same one. Hand-written rather than `governor`, whose
//! keyed limiter cannot let two classes of sender share one bucket with different tolerances.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::domain::Platform;

/// Who a request serves, which decides how much of the chat's burst it may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    /// A person is waiting for it: a reply's first message (or first preview message).
    Person,
    /// The edit that turns a preview into the answer: a person waits for it too; an edit, so
    /// outside the platform's overall message budget.
    Final,
    /// Any other message: paced at the steady rate.
    Bulk,
    /// A streaming preview's edit: bulk, no closer than the chat's preview interval, and
    /// within the platform's overall edit budget.
    Preview,
}

/// A token bucket: one token every `every`, at most `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub every: Duration,
    pub burst: u32,
}

impl Bucket {
    /// How far ahead of the steady rate a sender allowed the burst may run.
    fn tolerance(&self) -> Duration {
        self.every * self.burst.saturating_sub(1)
    }
}

/// A platform's limits: per private chat, per group chat, and across all its chats for
/// messages and for preview edits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub private: Bucket,
    pub group: Bucket,
    pub overall: Option<Window>,
    pub overall_edits: Option<Window>,
    /// Which chat ids are groups (paced by `group`); the platform's own rule.
    pub is_group: fn(&str) -> bool,
}

/// At most `max` in any `per`: a sliding window, so a burst across many chats leaves at once
/// up to the platform's figure, and never more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub max: usize,
    pub per: Duration,
}

impl Limits {
    /// Telegram's published limits (core.telegram.org/bots/faq): about one message a second in
    /// a chat ("short bursts over this limit are allowed"), 20 a minute in a group, 30 a second
    /// overall. Groups refill at 17 a minute with a burst of 3, so no minute holds more than 20.
    /// Preview edits across all chats keep under 20 a second on a budget of their own.
    pub fn telegram() -> Limits {
        Limits {
            private: Bucket {
                every: Duration::from_secs(1),
                burst: 10,
            },
            group: Bucket {
                every: Duration::from_secs(60) / 17,
                burst: 3,
            },
            overall: Some(Window {
                max: 30,
                per: Duration::from_secs(1),
            }),
            overall_edits: Some(Window {
                max: 20,
                per: Duration::from_secs(1),
            }),
            // Groups and channels have negative ids.
            is_group: |chat| chat.starts_with('-'),
        }
    }

    /// Discord's per-channel limit (5 messages per 5 s): one a second with a burst of 3. Its
    /// global limit (50 requests a second) is left to serenity's own rate limiter, which reads
    /// the buckets Discord announces.
    pub fn discord() -> Limits {
        let channel = Bucket {
            every: Duration::from_secs(1),
            burst: 3,
        };
        Limits {
            private: channel,
            group: channel,
            overall: None,
            overall_edits: None,
            is_group: |_| false,
        }
    }

    fn for_chat(&self, chat: &str) -> Bucket {
        match (self.is_group)(chat) {
            true => self.group,
            false => self.private,
        }
    }
}

#[derive(Default)]
pub struct Pace {
    limits: HashMap<Platform, Limits>,
    previews: HashMap<Platform, Duration>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    chats: HashMap<(Platform, String), ChatSlots>,
    /// Per platform: messages (`false`) and preview edits (`true`).
    overall: HashMap<(Platform, bool), VecDeque<Instant>>,
}

/// A chat's bucket (its theoretical arrival time) and its next free preview slot.
#[derive(Clone, Copy)]
struct ChatSlots {
    tat: Instant,
    preview: Instant,
}

impl Pace {
    /// `limits`: the paced platforms (none for a platform sends freely); `previews`: the least
    /// time between two preview edits in one chat of a platform.
    pub fn new(limits: HashMap<Platform, Limits>, previews: HashMap<Platform, Duration>) -> Pace {
        Pace {
            limits,
            previews,
            state: Mutex::new(State::default()),
        }
    }

    /// Waits for this chat's next slot for `urgency` and takes it, then for the platform's.
    pub async fn wait(&self, platform: Platform, chat: &str, urgency: Urgency) {
        let asked = Instant::now();
        let at = self.chat_slot(platform, chat, urgency, asked, true);
        // The platform's token is taken when the chat's slot has come, not reserved ahead:
        // a long reply's later chunks must not hold other chats back meanwhile.
        tokio::time::sleep_until(at).await;
        let now = Instant::now();
        let overall = self.overall_slot(platform, urgency, now, true);
        tokio::time::sleep_until(overall).await;
        if at > asked || overall > now {
            metrics::counter!("herald_pace_waits_total", "platform" => platform.to_string())
                .increment(1);
        }
    }

    /// How long until a preview edit of this chat could leave, without taking the slot.
    pub fn ready_in(&self, platform: Platform, chat: &str) -> Duration {
        let now = Instant::now();
        let at = self.chat_slot(platform, chat, Urgency::Preview, now, false);
        self.overall_slot(platform, Urgency::Preview, at, false)
            .saturating_duration_since(now)
    }

    /// The chat's next slot for `urgency` (its bucket and, for a preview, its interval);
    /// `take` reserves it.
    fn chat_slot(
        &self,
        platform: Platform,
        chat: &str,
        urgency: Urgency,
        now: Instant,
        take: bool,
    ) -> Instant {
        let bucket = self.limits.get(&platform).map(|l| l.for_chat(chat));
        let preview_gap = match urgency {
            Urgency::Preview => self.previews.get(&platform).copied(),
            _ => None,
        };
        if bucket.is_none() && preview_gap.is_none() {
            return now;
        }
        let mut state = self.state.lock().expect("pace lock");
        if take && state.chats.len() > 10_000 {
            state.chats.retain(|_, s| s.tat.max(s.preview) > now);
        }
        let key = (platform, chat.to_string());
        let mut slots = state.chats.get(&key).copied().unwrap_or(ChatSlots {
            tat: now,
            preview: now,
        });
        let mut at = now;
        if let Some(b) = bucket {
            let slack = match urgency {
                Urgency::Person | Urgency::Final => b.tolerance(),
                Urgency::Bulk | Urgency::Preview => Duration::ZERO,
            };
            at = at.max(slots.tat.checked_sub(slack).unwrap_or(now));
        }
        if preview_gap.is_some() {
            at = at.max(slots.preview);
        }
        if take {
            if let Some(b) = bucket {
                slots.tat = slots.tat.max(at) + b.every;
            }
            if let Some(gap) = preview_gap {
                slots.preview = at + gap;
            }
            state.chats.insert(key, slots);
        }
        at
    }

    /// The platform's next slot across all its chats from `now` (messages, or preview edits;
    /// a final edit has none); `take` reserves it.
    fn overall_slot(
        &self,
        platform: Platform,
        urgency: Urgency,
        now: Instant,
        take: bool,
    ) -> Instant {
        let limits = self.limits.get(&platform);
        let (window, edits) = match urgency {
            Urgency::Person | Urgency::Bulk => (limits.and_then(|l| l.overall), false),
            Urgency::Preview => (limits.and_then(|l| l.overall_edits), true),
            Urgency::Final => (None, false),
        };
        let Some(Window { max, per }) = window else {
            return now;
        };
        let mut state = self.state.lock().expect("pace lock");
        let sent = state.overall.entry((platform, edits)).or_default();
        let at = match sent.len().checked_sub(max) {
            Some(i) => now.max(sent[i] + per),
            None => now,
        };
        if take {
            sent.push_back(at);
            while sent.len() > max {
                sent.pop_front();
            }
        }
        at
    }
}

#[cfg(test)]
#[path = "pace_tests.rs"]
mod tests;
