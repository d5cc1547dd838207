//! The pace of message edits per chat, shared by the live previews of turns and the outbox's
//! final edit, so a chat never sees two edits closer than its platform's interval.
//!
//! Each caller reserves the next free slot of its chat and sleeps until then; reservations
//! are taken under one lock, so two callers cannot take the same slot. A platform may also have
//! an overall spacing across all its chats (Telegram: edits are not paced by teloxide's send
//! throttle, so Herald caps them here).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::domain::Platform;

#[derive(Default)]
pub struct EditPace {
    intervals: HashMap<Platform, Duration>,
    overall: HashMap<Platform, Duration>,
    next_free: Mutex<Slots>,
}

#[derive(Default)]
struct Slots {
    chats: HashMap<(Platform, String), Instant>,
    platforms: HashMap<Platform, Instant>,
}

impl EditPace {
    /// `intervals`: least time between two edits in one chat; `overall`: between two edits
    /// anywhere on the platform.
    pub fn new(
        intervals: HashMap<Platform, Duration>,
        overall: HashMap<Platform, Duration>,
    ) -> EditPace {
        EditPace {
            intervals,
            overall,
            next_free: Mutex::new(Slots::default()),
        }
    }

    pub fn interval(&self, platform: Platform) -> Duration {
        self.intervals
            .get(&platform)
            .copied()
            .unwrap_or(Duration::ZERO)
    }

    /// Waits for this chat's next slot and takes it: a final edit (it stands in for a send,
    /// one for one) or a preview's first message.
    pub async fn wait(&self, platform: Platform, chat: &str) {
        let at = self.reserve(platform, chat, false);
        tokio::time::sleep_until(at).await;
    }

    /// [`EditPace::wait`], also within the platform's overall spacing: a preview edit, which
    /// comes on top of the messages a reply would send anyway.
    pub async fn wait_shared(&self, platform: Platform, chat: &str) {
        let at = self.reserve(platform, chat, true);
        tokio::time::sleep_until(at).await;
    }

    /// How long until this chat could be edited, without taking the slot.
    pub fn ready_in(&self, platform: Platform, chat: &str) -> Duration {
        let slots = self.next_free.lock().expect("pace lock");
        let at = slots.chats.get(&(platform, chat.to_string())).copied();
        at.map(|at| at.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::ZERO)
    }

    fn reserve(&self, platform: Platform, chat: &str, shared: bool) -> Instant {
        let interval = self.interval(platform);
        let overall = self.overall.get(&platform).copied().unwrap_or_default();
        let now = Instant::now();
        let mut slots = self.next_free.lock().expect("pace lock");
        if slots.chats.len() > 10_000 {
            slots.chats.retain(|_, at| *at > now);
        }
        let global = match shared {
            true => slots.platforms.get(&platform).copied().unwrap_or(now),
            false => now,
        };
        let chat_slot = slots
            .chats
            .get(&(platform, chat.to_string()))
            .copied()
            .unwrap_or(now);
        let at = chat_slot.max(global).max(now);
        slots
            .chats
            .insert((platform, chat.to_string()), at + interval);
        if shared {
            slots.platforms.insert(platform, at + overall);
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn edits_of_one_chat_are_spaced() {
        let gap = Duration::from_millis(150);
        let pace = EditPace::new(HashMap::from([(Platform::Telegram, gap)]), HashMap::new());
        let start = Instant::now();
        pace.wait(Platform::Telegram, "1").await;
        pace.wait(Platform::Telegram, "2").await;
        pace.wait(Platform::Discord, "1").await;
        assert!(
            start.elapsed() < gap,
            "other chats and platforms do not wait"
        );
        pace.wait(Platform::Telegram, "1").await;
        assert!(start.elapsed() >= gap, "the same chat waits its turn");
        assert!(pace.ready_in(Platform::Telegram, "1") > Duration::ZERO);
        assert_eq!(pace.ready_in(Platform::Telegram, "3"), Duration::ZERO);
    }

    #[tokio::test]
    async fn a_platform_wide_spacing_holds_across_chats() {
        let overall = Duration::from_millis(60);
        let pace = EditPace::new(
            HashMap::new(),
            HashMap::from([(Platform::Telegram, overall)]),
        );
        let start = Instant::now();
        for chat in ["1", "2", "3"] {
            pace.wait_shared(Platform::Telegram, chat).await;
        }
        assert!(start.elapsed() >= overall * 2, "three edits, two gaps");
        let before = Instant::now();
        pace.wait(Platform::Telegram, "4").await;
        assert!(
            before.elapsed() < overall,
            "a final edit is not held by previews elsewhere"
        );
    }
}
