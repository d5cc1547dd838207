//! A hook's `rate_per_min`: at most that many authenticated deliveries in any 60 seconds,
//! counted in this process (each replica keeps its own window).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const WINDOW: Duration = Duration::from_secs(60);

pub struct Window {
    limit: usize,
    seen: Mutex<VecDeque<Instant>>,
}

impl Window {
    pub fn per_minute(limit: u32) -> Window {
        Window {
            limit: limit as usize,
            seen: Mutex::new(VecDeque::new()),
        }
    }

    /// Counts one delivery now; false when the last minute already holds `limit`.
    pub fn admit(&self) -> bool {
        self.admit_at(Instant::now())
    }

    fn admit_at(&self, now: Instant) -> bool {
        let mut seen = self.seen.lock().expect("rate lock");
        while seen
            .front()
            .is_some_and(|t| now.duration_since(*t) >= WINDOW)
        {
            seen.pop_front();
        }
        if seen.len() >= self.limit {
            return false;
        }
        seen.push_back(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_admits_its_limit_per_minute() {
        let w = Window::per_minute(2);
        let t = Instant::now();
        assert!(w.admit_at(t));
        assert!(w.admit_at(t + Duration::from_secs(1)));
        assert!(!w.admit_at(t + Duration::from_secs(2)));
        assert!(w.admit_at(t + Duration::from_secs(60)));
        assert!(!w.admit_at(t + Duration::from_secs(60)));
    }
}
