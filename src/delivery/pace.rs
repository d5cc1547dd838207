//! The pace of message edits per chat, shared by the live previews of turns and the outbox's
//! final edit, so a chat never sees two edits closer than its platform's interval.
//!
//! Each caller reserves the next free slot of its chat and sleeps until then; reservations
//! are taken under one lock, so two callers cannot take the same slot.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::domain::Platform;

#[derive(Default)]
pub struct EditPace {
    intervals: HashMap<Platform, Duration>,
    next_free: Mutex<HashMap<(Platform, String), Instant>>,
}

impl EditPace {
    pub fn new(intervals: HashMap<Platform, Duration>) -> EditPace {
        EditPace {
            intervals,
            next_free: Mutex::new(HashMap::new()),
        }
    }

    pub fn interval(&self, platform: Platform) -> Duration {
        self.intervals
            .get(&platform)
            .copied()
            .unwrap_or(Duration::ZERO)
    }

    /// Waits for this chat's next edit slot and takes it.
    pub async fn wait(&self, platform: Platform, chat: &str) {
        let at = self.reserve(platform, chat);
        tokio::time::sleep_until(at).await;
    }

    /// How long until this chat could be edited, without taking the slot.
    pub fn ready_in(&self, platform: Platform, chat: &str) -> Duration {
        let map = self.next_free.lock().expect("pace lock");
        map.get(&(platform, chat.to_string()))
            .map(|at| at.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::ZERO)
    }

    fn reserve(&self, platform: Platform, chat: &str) -> Instant {
        let interval = self.interval(platform);
        let now = Instant::now();
        let mut map = self.next_free.lock().expect("pace lock");
        if map.len() > 10_000 {
            map.retain(|_, at| *at > now);
        }
        let slot = map.entry((platform, chat.to_string())).or_insert(now);
        let at = (*slot).max(now);
        *slot = at + interval;
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn edits_of_one_chat_are_spaced() {
        let gap = Duration::from_millis(150);
        let pace = EditPace::new(HashMap::from([(Platform::Telegram, gap)]));
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
}
