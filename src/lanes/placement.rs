//! Which live replica runs a lane that nobody runs yet.
//!
//! Every replica hears the others' free worker slots once a second (`Signal::Slots`). A lane
//! whose lease is free goes to one replica chosen by weighted rendezvous hashing over those
//! slots: each replica's share of new lanes is in proportion to its free slots, a saturated
//! replica gets none, and two replicas that rescan the same lane with the same view choose the
//! same one. A lane already held stays with its holder (its worker is warm and ordered).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::domain::LaneKey;

/// A peer not heard from for this long is not given lanes (its slots beat comes every second).
const FRESH: Duration = crate::store::ROLE_LEASE_TTL;

pub(super) struct Placement {
    me: String,
    peers: Mutex<HashMap<String, Peer>>,
}

struct Peer {
    free: u32,
    seen: Instant,
}

impl Peer {
    fn fresh(&self) -> bool {
        self.seen.elapsed() < FRESH
    }
}

impl Placement {
    pub(super) fn new(me: &str) -> Placement {
        Placement {
            me: me.to_string(),
            peers: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn me(&self) -> &str {
        &self.me
    }

    /// A peer's slots beat (this replica's own is ignored).
    pub(super) fn heard(&self, from: &str, free: u32) {
        if from == self.me {
            return;
        }
        self.peers.lock().expect("peers lock").insert(
            from.to_string(),
            Peer {
                free,
                seen: Instant::now(),
            },
        );
    }

    /// Whether any other replica was heard from lately: only then is there anyone to tell.
    pub(super) fn has_peers(&self) -> bool {
        self.peers() > 0
    }

    /// Other replicas heard from lately.
    pub(super) fn peers(&self) -> usize {
        self.peers
            .lock()
            .expect("peers lock")
            .values()
            .filter(|p| p.fresh())
            .count()
    }

    /// Forgets the peers not heard from lately; true when any was forgotten (it may have died
    /// holding lanes, which the caller then looks for).
    pub(super) fn forget_silent(&self) -> bool {
        let mut peers = self.peers.lock().expect("peers lock");
        let before = peers.len();
        peers.retain(|_, p| p.fresh());
        peers.len() < before
    }

    /// Whether `replica` was heard from lately (this replica always is).
    pub(super) fn is_live(&self, replica: &str) -> bool {
        replica == self.me
            || self
                .peers
                .lock()
                .expect("peers lock")
                .get(replica)
                .is_some_and(Peer::fresh)
    }

    /// The replica that should take up `lane`, given this one's free slots.
    pub(super) fn choose(&self, lane: &LaneKey, my_free: u32) -> String {
        let peers = self.peers.lock().expect("peers lock");
        let candidates = std::iter::once((self.me.as_str(), my_free)).chain(
            peers
                .iter()
                .filter(|(_, p)| p.fresh())
                .map(|(name, p)| (name.as_str(), p.free)),
        );
        choose_weighted(lane, candidates)
            .unwrap_or(&self.me)
            .to_string()
    }
}

/// Weighted rendezvous hashing: each candidate with weight w > 0 scores w / -ln(u), where u in
/// (0, 1] is a hash of (lane, candidate); the highest score wins. A candidate's chance is its
/// share of the total weight. `None` when every weight is 0.
fn choose_weighted<'a>(
    lane: &LaneKey,
    candidates: impl Iterator<Item = (&'a str, u32)>,
) -> Option<&'a str> {
    candidates
        .filter(|(_, w)| *w > 0)
        .map(|(name, w)| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (lane.as_str(), name).hash(&mut h);
            // 53 bits, shifted into (0, 1].
            let u = ((h.finish() >> 11) + 1) as f64 / (1u64 << 53) as f64;
            (name, f64::from(w) / -u.ln().min(-f64::MIN_POSITIVE))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shares(weights: &[(&str, u32)], lanes: usize) -> HashMap<String, usize> {
        let mut out = HashMap::new();
        for i in 0..lanes {
            let lane = LaneKey::new(&format!("telegram:{i}"));
            let name = choose_weighted(&lane, weights.iter().copied()).unwrap();
            *out.entry(name.to_string()).or_default() += 1;
        }
        out
    }

    #[test]
    fn lanes_split_in_proportion_to_free_slots() {
        let even = shares(&[("a", 8), ("b", 8)], 4000);
        assert!((1800..=2200).contains(&even["a"]), "{even:?}");
        let skewed = shares(&[("a", 24), ("b", 8)], 4000);
        assert!((2800..=3200).contains(&skewed["a"]), "{skewed:?}");
        let three = shares(&[("a", 4), ("b", 4), ("c", 4)], 3000);
        for n in ["a", "b", "c"] {
            assert!((850..=1150).contains(&three[n]), "{three:?}");
        }
    }

    #[test]
    fn a_full_replica_gets_nothing_and_all_full_means_here() {
        let s = shares(&[("a", 0), ("b", 3)], 200);
        assert_eq!(s.get("a"), None);
        assert_eq!(s["b"], 200);
        let p = Placement::new("me");
        p.heard("other", 0);
        assert_eq!(p.choose(&LaneKey::new("web:x"), 0), "me");
    }

    #[test]
    fn the_choice_is_stable_for_a_lane() {
        let lane = LaneKey::new("discord:9");
        let w = [("a", 5), ("b", 5), ("c", 5)];
        let first = choose_weighted(&lane, w.iter().copied());
        for _ in 0..10 {
            assert_eq!(choose_weighted(&lane, w.iter().copied()), first);
        }
    }

    #[test]
    fn peers_are_heard_but_not_oneself() {
        let p = Placement::new("me");
        assert!(!p.has_peers());
        p.heard("me", 5);
        assert!(!p.has_peers());
        p.heard("r2", 5);
        assert!(p.has_peers() && p.is_live("r2") && p.is_live("me") && !p.is_live("r3"));
        assert!(!p.forget_silent(), "r2 was heard just now");
    }
}
