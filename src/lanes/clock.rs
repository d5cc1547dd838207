//! The turn deadline, minus the time the turn spends parked on a person.
//!
//! A turn waiting for an approval is not slow: the wait has its own deadline
//! (`approvals.timeout_secs`), so time parked there does not count against
//! `agent.turn_timeout_secs`. The typing indicator also rests while the turn is parked.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub struct TurnClock {
    budget: Duration,
    state: Mutex<State>,
}

struct State {
    started: Instant,
    /// Parked time already over.
    parked: Duration,
    /// Open parks and when the first of them began.
    open: usize,
    since: Option<Instant>,
}

impl TurnClock {
    pub fn new(budget: Duration) -> TurnClock {
        TurnClock {
            budget,
            state: Mutex::new(State {
                started: Instant::now(),
                parked: Duration::ZERO,
                open: 0,
                since: None,
            }),
        }
    }

    /// The turn's whole budget, as configured.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Stops the clock until the returned guard is dropped.
    pub fn park(&self) -> Parked<'_> {
        let mut s = self.state.lock().expect("clock lock");
        if s.open == 0 {
            s.since = Some(Instant::now());
        }
        s.open += 1;
        Parked(self)
    }

    pub fn is_parked(&self) -> bool {
        self.state.lock().expect("clock lock").open > 0
    }

    /// When the turn runs out of time, or `None` while it is parked.
    fn deadline(&self) -> Option<Instant> {
        let s = self.state.lock().expect("clock lock");
        (s.open == 0).then(|| s.started + self.budget + s.parked)
    }

    /// Resolves once the unparked time passes the budget.
    pub async fn expired(&self) {
        loop {
            match self.deadline() {
                Some(d) if Instant::now() >= d => return,
                Some(d) => tokio::time::sleep_until(d).await,
                None => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
}

pub struct Parked<'a>(&'a TurnClock);

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        let mut s = self.0.state.lock().expect("clock lock");
        s.open -= 1;
        if s.open == 0 {
            if let Some(since) = s.since.take() {
                s.parked += since.elapsed();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn parked_time_does_not_count() {
        let ms = Duration::from_millis;
        let clock = TurnClock::new(ms(300));
        tokio::time::sleep(ms(200)).await;
        {
            let _p = clock.park();
            tokio::time::sleep(ms(400)).await;
            assert!(clock.deadline().is_none());
        }
        // 100 ms of budget are left, whatever the 400 ms parked.
        let before = Instant::now();
        clock.expired().await;
        let waited = before.elapsed();
        assert_eq!(waited, ms(100));
    }
}
